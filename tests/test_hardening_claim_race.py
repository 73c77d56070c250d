"""Two ingests claiming one new folder at the same moment both succeed (the marker is written once or
twice, never half): a shared temporary name made the slower one fail with exit 4."""

from __future__ import annotations

import threading
from pathlib import Path

from tracecore.ingest.layout import MARKER, claim


def test_concurrent_claims_of_an_empty_folder_all_succeed(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    for i in range(150):  # bounded: the race needs both threads between write and rename
        out = tmp_path / f"out{i}"
        out.mkdir()
        start = threading.Barrier(4)

        def one(out: Path = out, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                claim(out)
            except BaseException as err:  # recorded, asserted below
                failures.append(err)

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert (out / MARKER).is_file()
    assert failures == []
