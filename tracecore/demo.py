"""The end-to-end demo on the embedded sample: ingest → views → report.

`make demo` runs this through `tracecore demo`. It is the main job in miniature, on a real 4-worker
PyTorch DDP (gloo) capture shipped inside the package (`tracecore.sample`), so a new user sees every
stage work before pointing tracecore at their own captures. Each shown table is a narrow SELECT over
a named view, printed with the view's name so the user knows what to query next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.ingest import IngestSummary


@dataclass(frozen=True)
class Shown:
    """One question the demo answers: the view behind it and a narrow query over that view."""

    question: str
    view: str
    sql: str


SHOWN: tuple[Shown, ...] = (
    Shown(
        "Who talks to whom? MB sent per directed worker pair",
        "flow_matrix",
        """PIVOT (SELECT src_worker AS "from", dst_worker, round(bytes / 1e6, 3) AS mb FROM flow_matrix())
           ON dst_worker USING sum(mb) ORDER BY "from" """,
    ),
    Shown(
        "Does the traffic match the collective? (gloo ring: rank i sends to i-1)",
        "topology_check",
        """SELECT src_worker, dst_worker, pattern, predicted, round(payload_per_step) AS payload_b_per_step,
                  predicted_per_step AS model_b_per_step, round(per_step_ratio, 4) AS ratio
           FROM topology_check() WHERE predicted ORDER BY src_worker""",
    ),
    Shown(
        "Bytes per training step (all workers) and per rank against 2(N-1)/N x gradient bytes",
        "data_per_step",
        """SELECT steps, round(step_s * 1e3, 1) AS step_ms, round(mb_per_step, 3) AS mb_per_step,
                  round(rank_payload_per_step) AS rank_payload_b, grad_bytes,
                  expected_rank_bytes AS model_rank_b, round(payload_ratio, 4) AS ratio
           FROM data_per_step()""",
    ),
    Shown(
        "Link utilization in 10 ms bins (links that carried ≥ 1 MB)",
        "link_util",
        """SELECT src_worker, dst_worker, round(max(gbps), 3) AS peak_gbps, round(avg(gbps), 4) AS mean_gbps,
                  count(*) AS bins, round(sum(bytes) / 1e6, 2) AS mb
           FROM link_util() GROUP BY ALL HAVING sum(bytes) >= 1e6 ORDER BY src_worker""",
    ),
    Shown(
        "Flows under five definitions (qp: RDMA queue pairs, none in this TCP run)",
        "flow_counts",
        "SELECT definition, flows FROM flow_counts() ORDER BY definition",
    ),
)


@dataclass
class DemoResult:
    """What the demo produced: the ingest summary, the shown tables and the report's path."""

    data_dir: Path
    summary: IngestSummary
    tables: dict[str, pa.Table] = field(default_factory=dict)  # keyed by Shown.view
    report: Path | None = None


def run_demo(out_dir: Path, *, progress: bool = False) -> DemoResult:
    """Ingest the embedded sample into `out_dir/data`, run the shown queries, write `out_dir/report`."""
    from tracecore.ingest import ingest, open_catalog
    from tracecore.query import run_sql
    from tracecore.report import write_report
    from tracecore.sample import sample_run

    data_dir = out_dir / "data"
    summary = ingest([sample_run()], data_dir, progress=progress)  # the run alone: not the tests' other one
    result = DemoResult(data_dir=data_dir, summary=summary)
    con = open_catalog(data_dir, read_only=True)
    try:
        for shown in SHOWN:
            result.tables[shown.view] = run_sql(con, shown.sql)
    finally:
        con.close()
    result.report = write_report(data_dir, out_dir / "report")
    return result
