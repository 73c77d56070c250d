"""bench.ingest_floor on the embedded sample: every part measured, the floor is its formula, and the
decoded packets equal the re-encoded rows (real reader, real Parquet writer, real processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ingest_floor import main
from tracecore.reader import read_capture
from tracecore.sample import sample_run


@pytest.mark.slow
def test_floor_of_the_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "floor.md"
    assert (
        main(
            ["--data", str(sample_run()), "--reps", "1", "--cores", "2", "--dpkt-s", "9.5", "--out", str(out)]
        )
        == 0
    )
    report = json.loads(out.with_suffix(".json").read_text())
    packets = sum(read_capture(p).num_rows for p in sorted(sample_run().glob("*.pcap")))
    assert report["packets"] == report["encoded_rows"] == packets == 17_027
    m = report["median"]
    assert m["floor"] == pytest.approx(m["imports"] + (m["decode_cpu_s"] + m["encode_cpu_s"]) / 2)
    assert 0 < m["start"] < m["imports"] < m["floor"]
    assert min(m["decode_cpu_s"], m["encode_cpu_s"], m["cat"], m["ingest"]) > 0
    text = out.read_text()
    assert text == capsys.readouterr().out.rstrip("\n") + "\n"
    assert f"**{m['floor']:.3f}**" in text
    assert f"dpkt loop 9.5 s (given): tracecore {9.5 / m['ingest']:.1f}x" in text


@pytest.mark.slow
def test_a_folder_whose_captures_ingest_does_not_read_is_refused() -> None:
    """tracecore/sample holds a run and, one level deeper, another that ingest does not read: the floor
    would compare different work, so it stops with one line instead."""
    with pytest.raises(SystemExit, match="decoded 22,863 packets but the ingest stored 17,027"):
        main(["--data", str(sample_run().parent), "--reps", "1", "--cores", "2"])
