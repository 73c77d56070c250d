"""The run-name format (built by the launchers, parsed by ingest) and run metadata from run.toml.

Why both name forms: the measurement code names folders `framework-model-optimizer-batchsize-backend-
loss-topology` with the loss as a raw number (`horovod-resnet50-adam-64-mpi-0-ring`), while the
published traces were renamed (`tf_sync-…-normal-ring`, `…-loss_0.1-ring`), the form tracecore's own
launchers write. Both parse to the same typed fields. Underscores live inside fields (`tf_sync`,
`grpc_nccl`), so splitting on `-` is exact for 7 fields. Experiment runners that repeat a
configuration or vary the worker count add an eighth field, the variant `w<workers>`, `r<repetition>`
or `w<workers>r<repetition>` (`…-normal-ring-w4r2`), parsed back into `extra`.
"""

from __future__ import annotations

import functools
import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracecore.errors import UsageError

FIELDS = ("framework", "model", "optimizer", "batch_size", "backend", "loss_pct", "topology")
MODEL_SIZE_KEYS = ("grad_bytes", "gradient_bytes", "n_params")  # typed columns, never `extra`
BYTES_PER_PARAM = 4  # fp32 gradients: grad_bytes when run.toml gives only n_params
_LOSS = re.compile(r"^(?:loss_)?(\d+(?:\.\d+)?)$")
_FIELD = re.compile(r"^[^-/\s]+$")  # one name field: no separator, no folder, no blank
_VARIANT = re.compile(r"^(?:w([1-9]\d*))?(?:r([1-9]\d*))?$")  # optional 8th field: workers, repetition


@dataclass
class RunMeta:
    """Typed metadata of one run; every field is None when the name does not follow the scheme."""

    framework: str | None = None
    model: str | None = None
    optimizer: str | None = None
    batch_size: int | None = None
    backend: str | None = None
    loss_pct: float | None = None
    topology: str | None = None
    name_parsed: bool = False
    grad_bytes: int | None = None  # gradient bytes all-reduced per step (see _apply_model_size)
    n_params: int | None = None  # model parameters (run.toml n_params)
    extra: dict = field(default_factory=dict)
    worker_ips: dict[str, str] = field(default_factory=dict)  # capture file or key → IP, from run.toml
    name: str | None = None  # run.toml [run] name, when given
    shared_addresses: bool = False  # run.toml [capture] shared_addresses: workers may share an IP
    # run.toml [[hosts]]: each host's clock offset from the runner's (tracecore run measures them)
    host_clocks: list[dict] = field(default_factory=list)

    def columns(self) -> dict:
        d = asdict(self)
        d.pop("worker_ips")
        d.pop("host_clocks")
        d.pop("name")
        d.pop("shared_addresses")
        d["extra"] = json.dumps(self.extra, sort_keys=True, default=str) if self.extra else None
        return d


@functools.lru_cache(maxsize=1024)
def format_loss(loss_pct: float) -> str:
    """The published loss field: 0 → `normal`, 1 → `loss_1`, 0.5 → `loss_0.5` (parse_loss reads it back)."""
    if loss_pct == 0:
        return "normal"
    for text in (f"{loss_pct:g}", repr(float(loss_pct))):
        if _LOSS.match(text) and float(text) == loss_pct:
            return f"loss_{text}"
    raise UsageError(f"loss {loss_pct!r} % cannot be written in a run name (a plain non-negative number)")


@functools.lru_cache(maxsize=4096)  # a matrix names a million runs from a few values of each field
def _check_field(key: str, value: str) -> None:
    if not isinstance(value, str) or not _FIELD.match(value):
        raise UsageError(f"run-name field {key} {value!r} must be non-empty, without '-', '/' or blanks")


def format_run_name(
    framework: str,
    model: str,
    optimizer: str,
    batch_size: int,
    backend: str,
    loss_pct: float,
    topology: str,
    *,
    workers: int | None = None,
    repetition: int | None = None,
) -> str:
    """`framework-model-optimizer-batchsize-backend-loss-topology[-w<workers>r<repetition>]`, the name
    parse_run_name reads back; the variant keeps repeated or rescaled runs of one configuration apart."""
    texts = zip(
        ("framework", "model", "optimizer", "backend", "topology"),
        (framework, model, optimizer, backend, topology),
        strict=True,
    )
    for key, value in texts:
        _check_field(key, value)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 0:
        raise UsageError(f"run-name batch size {batch_size!r} must be a whole number ≥ 0")
    variant = ""
    for letter, number in (("w", workers), ("r", repetition)):
        if number is not None:
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise UsageError(f"run-name {letter} value {number!r} must be a whole number ≥ 1")
            variant += f"{letter}{number}"
    fields = (framework, model, optimizer, str(batch_size), backend, format_loss(loss_pct), topology)
    return "-".join(fields + ((variant,) if variant else ()))


def parse_loss(text: str) -> float | None:
    """`0`, `0.05`, `normal` (= 0), `loss_0.1` → loss in percent; anything else → None."""
    if text == "normal":
        return 0.0
    m = _LOSS.match(text)
    return float(m.group(1)) if m else None


def parse_run_name(name: str) -> RunMeta:
    """Split a folder name into typed fields; a name that does not fit gives all-None fields."""
    parts = name.split("-")
    variant = None
    if len(parts) == len(FIELDS) + 1:
        variant = _VARIANT.match(parts.pop())
        if variant is None or not variant.group(0):
            return RunMeta()
    if len(parts) != len(FIELDS) or not all(parts):
        return RunMeta()
    fw, model, opt, bsize, backend, loss, topo = parts
    loss_pct = parse_loss(loss)
    if not bsize.isdigit() or loss_pct is None:
        return RunMeta()
    extra = {}
    if variant is not None:
        for key, text in zip(("workers", "repetition"), variant.groups(), strict=True):
            if text is not None:
                extra[key] = int(text)
    return RunMeta(fw, model, opt, int(bsize), backend, loss_pct, topo, name_parsed=True, extra=extra)


def apply_run_toml(meta: RunMeta, path: Path) -> list[str]:
    """Overlay run.toml (top level or its [run] table) onto `meta`; returns warnings.

    Known keys replace the parsed fields (`loss` may be given in either name form); `name` renames
    the run; `[[capture.worker]]` entries with `file` and `ip` (or a `[workers]` table of file = ip)
    pin worker addresses. Every other key is kept in `extra`.
    """
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return [f"{path}: ignored, not valid TOML: {err}"]
    warnings: list[str] = []
    run = doc.get("run") if isinstance(doc.get("run"), dict) else doc
    for key, value in run.items():
        if isinstance(value, dict | list):
            continue
        if key in ("batch_size", "n_workers"):
            if key == "batch_size" and _is_int(value):
                meta.batch_size = int(value)
            elif key == "batch_size":
                warnings.append(f"{path}: batch_size {value!r} is not an integer; ignored")
        elif key == "loss_pct" or (key == "loss" and run.get("loss_pct") is None):
            loss = parse_loss(str(value)) if isinstance(value, str) else _num(value)
            if loss is None:
                warnings.append(f"{path}: {key} {value!r} is not a loss; ignored")
            else:
                meta.loss_pct = loss
        elif key in FIELDS:
            setattr(meta, key, str(value))
        elif key == "name" and isinstance(value, str) and value:
            meta.name = value
        elif key != "loss" and key not in MODEL_SIZE_KEYS:
            meta.extra[key] = value
    _apply_model_size(meta, run, doc.get("model"))
    capture = doc.get("capture") if isinstance(doc.get("capture"), dict) else {}
    meta.shared_addresses = capture.get("shared_addresses") is True
    for entry in capture.get("worker") or []:
        if isinstance(entry, dict) and entry.get("file") and entry.get("ip"):
            meta.worker_ips[str(entry["file"])] = str(entry["ip"])
    for key, value in (doc.get("workers") or {}).items():
        if isinstance(value, str):
            meta.worker_ips[key] = value
    meta.host_clocks = _host_clocks(doc.get("hosts"))
    return warnings


def _host_clocks(hosts: object) -> list[dict]:
    """run.toml's `[[hosts]]` entries that carry an address and a clock offset (runners/clocks.py:
    offset = host − runner, known to within half the round trip)."""
    found = []
    for entry in hosts if isinstance(hosts, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("ip"), str):
            continue
        offset, rtt = entry.get("clock_offset_ns"), entry.get("clock_rtt_ns")
        if not (_is_int(offset) and abs(int(offset)) < 2**62):
            continue
        found.append(
            {
                "host": str(entry["name"])[:255] if "name" in entry else None,
                "ip": entry["ip"][:64],
                "offset_ns": int(offset),
                "rtt_ns": int(rtt) if _is_int(rtt) and 0 <= int(rtt) < 2**62 else None,
            }
        )
    return found


def _apply_model_size(meta: RunMeta, run: dict, model: object) -> None:
    """Gradient bytes and parameter count, typed, from [run] then [model] (the later wins), gradient
    bytes from the parameters when only they are given: the views' physics and the models need them."""
    for table in (run, model if isinstance(model, dict) else {}):
        for key in ("grad_bytes", "gradient_bytes"):
            if _is_int(table.get(key)):
                meta.grad_bytes = int(table[key])
        if _is_int(table.get("n_params")):
            meta.n_params = int(table["n_params"])
    if meta.grad_bytes is None and meta.n_params is not None:
        meta.grad_bytes = meta.n_params * BYTES_PER_PARAM


def _is_int(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and value.isdigit()
    )


def _num(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
