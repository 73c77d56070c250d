"""What an ingest did, per capture and in total: returned by `ingest()`, printed by the CLI."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class CaptureOutcome:
    run: str
    file: str
    status: str  # ingested | unchanged | partial | failed | removed
    worker: str | None = None
    packets: int = 0
    bytes: int = 0  # on-wire bytes (sum of frame_len)
    input_bytes: int = 0  # capture file size
    seconds: float = 0.0
    message: str | None = None  # the error, for partial and failed


@dataclass
class IngestSummary:
    out: Path
    runs: list[str] = field(default_factory=list)
    captures: list[CaptureOutcome] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # inputs that were not captures/logs
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        """True when any capture, log or input could not be (fully) read."""
        return bool(self.problems) or any(c.status in ("partial", "failed") for c in self.captures)

    def _read(self) -> list[CaptureOutcome]:
        return [c for c in self.captures if c.status in ("ingested", "partial")]

    @property
    def packets(self) -> int:
        return sum(c.packets for c in self._read())

    @property
    def input_bytes(self) -> int:
        return sum(c.input_bytes for c in self._read())

    def rate(self) -> tuple[float, float]:
        """(packets/s, bytes/s of capture files) over the wall time of the whole ingest."""
        if self.seconds <= 0:
            return 0.0, 0.0
        return self.packets / self.seconds, self.input_bytes / self.seconds

    def to_json(self) -> dict:
        pps, bps = self.rate()
        counts: dict[str, int] = {}
        for c in self.captures:
            counts[c.status] = counts.get(c.status, 0) + 1
        return {
            "out": str(self.out),
            "ok": not self.failed,
            "runs": self.runs,
            "counts": counts,
            "packets": self.packets,
            "input_bytes": self.input_bytes,
            "seconds": round(self.seconds, 3),
            "packets_per_s": round(pps),
            "bytes_per_s": round(bps),
            "captures": [asdict(c) for c in self.captures],
            "problems": [{"path": p, "reason": r} for p, r in self.problems],
            "warnings": self.warnings,
        }
