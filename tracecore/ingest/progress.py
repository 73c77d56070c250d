"""The live progress bar (rich, on stderr): files done, packets/s and GB/s of capture read.

Kept apart from the pipeline so the library runs silently unless asked, and so worker processes
(which only send (bytes, packets) ticks over a queue) never touch the terminal. rich is imported
only when a bar is shown: its import costs ~80 ms before the first capture is read.
"""

from __future__ import annotations

import time


def _rates_column() -> object:
    """A rich column showing packets/s and GB/s of capture read so far."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class Rates(ProgressColumn):
        def render(self, task: Task) -> Text:
            elapsed = max(task.elapsed or 0.0, 1e-9)
            pps = task.fields.get("packets", 0) / elapsed
            gbs = task.completed / elapsed / 1e9
            return Text(f"{pps / 1e6:6.2f} Mpkt/s {gbs:5.2f} GB/s", style="cyan")

    return Rates()


class IngestProgress:
    """Context manager; `tick(nbytes, packets)` from worker reports, `file_done()` per capture."""

    def __init__(self, total_bytes: int, total_files: int, enabled: bool):
        self.enabled = enabled
        self.files = 0
        self.total_files = total_files
        self.packets = 0
        self._last = 0.0
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]ingest"),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                _rates_column(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._progress.add_task("ingest", total=max(total_bytes, 1), packets=0, files="")

    def __enter__(self) -> IngestProgress:
        if self.enabled:
            self._progress.start()
            self._refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._progress.stop()

    def _refresh(self) -> None:
        if self.enabled:
            self._progress.update(
                self._task, packets=self.packets, files=f"{self.files}/{self.total_files} files"
            )

    def tick(self, nbytes: int, packets: int) -> None:
        self.packets += packets
        if self.enabled:
            self._progress.advance(self._task, nbytes)
            now = time.monotonic()
            if now - self._last > 0.1:
                self._last = now
                self._refresh()

    def file_done(self, remaining_bytes: int = 0) -> None:
        self.files += 1
        if self.enabled:
            if remaining_bytes > 0:
                self._progress.advance(self._task, remaining_bytes)
            self._refresh()


class TraceProgress:
    """Context manager for the logs and traces of a run: `file_done(nbytes)` per file parsed, with
    MB/s of input, shown only when asked and the files are big enough to take a while."""

    MIN_BYTES = 16 << 20  # below this a run's logs parse in about a second: no bar

    def __init__(self, run: str, total_bytes: int, total_files: int, enabled: bool):
        self.enabled = enabled and total_bytes >= self.MIN_BYTES
        self.files, self.total_files = 0, total_files
        if self.enabled:
            from rich.console import Console
            from rich.markup import escape
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                TextColumn(f"[bold]traces[/bold] {escape(run[:40])}", markup=True),
                BarColumn(),
                TextColumn("{task.fields[files]}"),
                TransferSpeedColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._task = self._progress.add_task("traces", total=max(total_bytes, 1), files="")

    def __enter__(self) -> TraceProgress:
        if self.enabled:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._progress.stop()

    def file_done(self, nbytes: int) -> None:
        self.files += 1
        if self.enabled:
            self._progress.update(self._task, advance=nbytes, files=f"{self.files}/{self.total_files} files")
