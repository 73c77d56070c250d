"""A test hook: an ingest stops at a named phase of its commit so that a test can SIGKILL it there.

Inert unless `TRACECORE_TEST_PAUSE_AT` is set (read once, at import): every call is then one
comparison. With `TRACECORE_TEST_PAUSE_AT=<phase>`, the first time the process reaches that phase
it writes `<phase> <pid>` to the file named by `TRACECORE_TEST_PAUSE_MARKER` (written whole, then
renamed; on stderr when that is unset) and sleeps for up to `SLEEP_S`, then goes on.
tests/test_ingest_robust.py kills the ingest at each phase and checks what it left.

Phases, in the order an ingest reaches them:
- `reading`: a capture has been read into `OUT/.staging/`; the dataset is untouched;
- `placed`: the new part files are renamed into `packets/`; the old catalog is still the committed one;
- `filled`: the new catalog's tables are in its temporary file's write-ahead log (one transaction,
  synced once), not yet checkpointed into the file;
- `draft`: the new catalog is complete and durable at its temporary name, not yet renamed;
- `committed`: the new catalog is renamed into place (the commit point); `tables/` not yet exported;
- `deleting`: the first of the files only the old catalog used is deleted, the others not yet.

And one phase of a query split by run (`QUERY_PHASES`, not an ingest's): `query`: a part of the query
has opened the dataset on a Dask worker (`query.run_part`), so a test can interrupt the driver then.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PHASES = ("reading", "placed", "filled", "draft", "committed", "deleting")
QUERY_PHASES = ("query",)
SLEEP_S = 300.0
NAP_S = 0.05

_AT = os.environ.get("TRACECORE_TEST_PAUSE_AT") or None
if _AT is not None and _AT not in PHASES + QUERY_PHASES:
    raise ValueError(f"TRACECORE_TEST_PAUSE_AT={_AT!r}: not one of {', '.join(PHASES + QUERY_PHASES)}")
_fired: set[str] = set()


def pause(phase: str) -> None:
    """Stop here when the test asked for `phase` (once per process); a no-op otherwise."""
    if phase != _AT or phase in _fired:
        return
    _fired.add(phase)
    line = f"{phase} {os.getpid()}\n"
    marker = os.environ.get("TRACECORE_TEST_PAUSE_MARKER")
    if marker:
        partial = Path(marker + ".partial")
        partial.write_text(line)
        os.replace(partial, marker)
    else:
        sys.stderr.write(line)
        sys.stderr.flush()
    # in short naps: Python runs a signal's handler on the main thread only once it wakes, and a signal
    # the kernel gives another thread does not wake it (Ctrl-C would wait out the whole pause)
    deadline = time.monotonic() + SLEEP_S
    while time.monotonic() < deadline:
        time.sleep(NAP_S)
