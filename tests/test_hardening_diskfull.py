"""A disk that fills up during an ingest leaves the old or the new dataset and one line (issue 12,
acceptance: the disk-full fault test, on a small tmpfs mounted by the test)."""

from __future__ import annotations

import gc
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.test_hardening_interrupt import NEW, OLD, _state
from tests.test_ingest_support import copy_run, records, write_pcap
from tracecore import views
from tracecore.ingest import ingest
from tracecore.ingest.writer import PartSink
from tracecore.reader import read_batches
from tracecore.sample import sample_run

REPO = Path(__file__).resolve().parent.parent
FREE_BYTES = (0, 64 << 10, 256 << 10, 1 << 20, 4 << 20)  # left free when the update starts (the last: enough)


@pytest.fixture
def tmpfs(tmp_path: Path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _fill(mnt: Path, leave: int) -> Path:
    """A file taking all but `leave` bytes of the file system."""
    filler = mnt / "filler"
    free = shutil.disk_usage(mnt).free
    with open(filler, "wb") as fh:
        chunk = b"\0" * (1 << 20)
        left = max(free - leave, 0)
        while left > 0:
            try:
                left -= fh.write(chunk[: min(len(chunk), left)])
            except OSError:
                break
    return filler


def _template_views(cache: Path) -> set[str]:
    """The views of the cached catalog template (a draft that later drafts start from)."""
    (template,) = cache.glob("catalog-template-*.duckdb")
    con = duckdb.connect(str(template), read_only=True)
    try:
        return {
            name
            for (name,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        }
    finally:
        con.close()


@pytest.mark.parametrize("free", FREE_BYTES)
def test_disk_full_leaves_old_or_new_and_one_line(
    tmp_path: Path, tmpfs: Path, free: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"  # this test's own template cache: a draft on the full disk must not poison it
    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(cache))
    run = copy_run(tmp_path / "src")
    out = tmpfs / "data"
    assert not ingest([run], out, jobs=1).failed
    assert _state(out) == OLD
    header, recs = records(run / "worker-2-tcpdump.pcap")
    write_pcap(run / "worker-2-tcpdump.pcap", header, recs[:3000])
    filler = _fill(tmpfs, free)
    proc = subprocess.run(
        [sys.executable, "-m", "tracecore", "ingest", str(run), "--out", str(out), "-j", "1", "-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == {0: 4, FREE_BYTES[-1]: 0}.get(free, proc.returncode)  # both paths run
    if proc.returncode == 0:
        assert _state(out) == NEW
    else:
        assert (proc.returncode, len(lines)) == (4, 1), proc.stderr
        assert lines[0].startswith(f"Error: {out}: ")
        assert "No space left on device" in lines[0]
        filler.unlink()
        assert _state(out) == OLD
    filler.unlink(missing_ok=True)
    assert not ingest([run], out, jobs=1).failed
    assert _state(out) == NEW
    assert set(views.view_names()) <= _template_views(cache)


def test_part_files_that_fill_the_disk_are_closed_once(tmpfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part file that cannot be written: `close()` raises and the sink's writers are closed then.
    Before, a writer whose close had failed was closed again by the garbage collector, whose
    "Exception ignored … No space left on device" lines went to stderr beside the ingest's one line
    (a clean clone once saw ten lines in the test above)."""
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    capture = sorted(sample_run().glob("*.pcap"))[0]
    for leave in (0, 4 << 10, 16 << 10, 32 << 10):
        stage = tmpfs / f"stage-{leave}"
        stage.mkdir()
        filler = _fill(tmpfs, leave)
        sink = PartSink(stage, 0)
        for batch in read_batches(capture, batch_rows=1000):
            sink.put(batch, new_part=False)
        with pytest.raises(OSError, match="No space left on device"):
            sink.close()
        del sink
        gc.collect()
        filler.unlink()
        shutil.rmtree(stage)
    assert [str(u.exc_value) for u in unraisable] == []
