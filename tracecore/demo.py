"""The end-to-end demo on the embedded sample: ingest → views → report.

`make demo` runs this through `tracecore demo`. It is the main job in miniature, on a real 4-worker
PyTorch DDP (gloo) capture shipped inside the package (`tracecore.sample`), so a new user sees every
stage work before pointing tracecore at their own captures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.ingest import IngestSummary

#: The views whose results the demo shows, with the question each answers.
SHOWN_VIEWS: tuple[tuple[str, str], ...] = (
    ("bytes_sent", "How much did each worker send?"),
    ("flow_matrix", "Who talks to whom?"),
    ("topology_check", "Does the traffic match the collective (gloo ring)?"),
    ("data_per_step", "How many bytes per training step?"),
)


@dataclass
class DemoResult:
    """What the demo produced: the ingest summary, a few view results and the report's path."""

    data_dir: Path
    summary: IngestSummary
    tables: dict[str, pa.Table] = field(default_factory=dict)
    link_peaks: pa.Table | None = None
    report: Path | None = None


def run_demo(out_dir: Path, *, progress: bool = False) -> DemoResult:
    """Ingest the embedded sample into `out_dir/data`, run the key views, write `out_dir/report`."""
    from tracecore.ingest import ingest, open_catalog
    from tracecore.query import run_sql, run_view
    from tracecore.report import write_report
    from tracecore.sample import sample_root

    data_dir = out_dir / "data"
    summary = ingest([sample_root()], data_dir, progress=progress)
    result = DemoResult(data_dir=data_dir, summary=summary)
    con = open_catalog(data_dir, read_only=True)
    try:
        for name, _question in SHOWN_VIEWS:
            result.tables[name] = run_view(con, name)
        result.link_peaks = run_sql(con, LINK_PEAKS_SQL)
    finally:
        con.close()
    result.report = write_report(data_dir, out_dir / "report")
    return result


#: Peak and mean 10 ms utilization of every link that carried real load (≥ 1 MB).
LINK_PEAKS_SQL = """
SELECT run, src_worker, dst_worker,
       round(max(gbps), 3) AS peak_gbps_10ms,
       round(avg(gbps), 3) AS mean_gbps_10ms,
       round(sum(bytes) / 1e6, 2) AS mb
FROM link_util()
GROUP BY ALL
HAVING sum(bytes) >= 1e6
ORDER BY run, src_worker, dst_worker
"""
