"""The report's tables: which view each shows, which of its rows and columns, under which headings,
and the HTML they become (numbers in `style.number`'s one format, run names shortened with the full
name as the cell's tooltip).

Why apart from report.py: the page's layout and the tables' content change for different reasons;
the GPU tables pick rows (a run's slowest collectives, its busiest flows) and put nanoseconds and
bytes into the units a person reads (ms, MB), which the views leave raw for SQL users.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracecore.figures.holds import has_collectives, has_nccl_logs, has_rdma

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

Runs = list[str] | None
Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Table:
    """A table of the report: a view's rows, or those `pick` makes of them, under readable headings."""

    view: str
    heading: str
    caption: str
    columns: list[str]
    # the report shows it only when this says the runs hold what it shows (None: always)
    shown_when: Callable[[duckdb.DuckDBPyConnection, Runs], bool] | None = None
    # the rows shown, made of the view's rows, and a note added to the caption ("" for none)
    pick: Callable[[Rows], tuple[Rows, str]] | None = None


def _gpu_run(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether a run has what the GPU section reads: collectives placed in time, or NCCL's logs."""
    return has_collectives(con, runs) or has_nccl_logs(con, runs)


def _ms(value: int | float | None) -> float | None:  # (the table writes 4 significant digits)
    return None if value is None else value / 1e6


def _pct(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _mb(value: int | float | None) -> float | None:
    return None if value is None else value / 1e6


def _steps(rows: Rows) -> tuple[Rows, str]:
    """step_breakdown's rows in ms: the iteration, the step's GPU span and its parts."""
    out = []
    for r in rows:
        out.append(
            {
                **{k: r[k] for k in ("run", "worker", "rank", "step", "timed_by")},
                "iteration_ms": _ms(r.get("iteration_ns")),
                "step_ms": _ms(r["step_ns"]),
                "compute_ms": _ms(r["compute_ns"]),
                "communication_ms": _ms(r["communication_ns"]),
                "overlap_ms": _ms(r["overlap_ns"]),
                "exposed_ms": _ms(r["exposed_ns"]),
                "gpu_idle_ms": _ms(r.get("gpu_idle_ns")),
                "gpu_idle_pct": _pct(r.get("gpu_idle_share")),
                "iteration_idle_pct": _pct(r.get("iteration_idle_share")),
            }
        )
    return out, ""


STRAGGLERS_SHOWN = 5  # per run: the collectives whose ranks started furthest apart


def _stragglers(rows: Rows) -> tuple[Rows, str]:
    """Each run's STRAGGLERS_SHOWN collectives with the widest start spread, from one source (NCCL's
    own first, as the collective timeline), in ms."""
    from tracecore.figures.registry import SOURCE_ORDER

    by_run: dict[str, Rows] = {}
    for r in rows:
        by_run.setdefault(r["run"], []).append(r)
    out, counts = [], []
    for run, items in by_run.items():
        source = next((s for s in SOURCE_ORDER if any(r["source"] == s for r in items)), items[0]["source"])
        items = [r for r in items if r["source"] == source]
        counts.append(len(items))
        for r in sorted(items, key=lambda r: -(r["spread_ns"] or 0))[:STRAGGLERS_SHOWN]:
            out.append(
                {
                    "run": run,
                    "source": source,
                    "op": r["op"],
                    "bytes": r["bytes"],
                    "step": r["step"],
                    "ranks": r["ranks"],
                    "late_rank": f"rank {r['last_rank']} ({r['last_worker'] or '?'})",
                    "spread_ms": _ms(r["spread_ns"]),
                    "wait_ms": _ms(r["wait_ns"]),
                    "call_spread_ms": _ms(r["call_spread_ns"]),
                    "last_caller_rank": r["last_caller_rank"],
                }
            )
    note = f"Each run's {STRAGGLERS_SHOWN} widest of its {', '.join(map(str, counts))} collectives."
    return out, note if any(n > STRAGGLERS_SHOWN for n in counts) else ""


TCP_FLOWS_SHOWN = 8  # per run: the flows with the most retransmissions, then the most payload


def _tcp_health(rows: Rows) -> tuple[Rows, str]:
    """Each run's flows that carried payload, those with the most retransmissions first, then the
    busiest: TCP_FLOWS_SHOWN of them, payload in MB."""
    by_run: dict[str, Rows] = {}
    for r in rows:
        if r["data_packets"]:
            by_run.setdefault(r["run"], []).append(r)
    out, counts = [], []
    for run, items in by_run.items():
        counts.append(len(items))
        ranked = sorted(items, key=lambda r: (-(r["retransmissions"] or 0), -(r["payload_bytes"] or 0)))
        for r in ranked[:TCP_FLOWS_SHOWN]:
            src, dst = r["src_worker"] or r["src_ip"], r["dst_worker"] or r["dst_ip"]
            out.append(
                {
                    "run": run,
                    "flow": f"{src}:{r['src_port']}→{dst}:{r['dst_port']}",
                    "payload_mb": _mb(r["payload_bytes"]),
                    "data_packets": r["data_packets"],
                    **{
                        k: r[k]
                        for k in (
                            "retransmissions",
                            "out_of_order",
                            "dup_acks",
                            "zero_window",
                            "window_full",
                            "rtt_median_us",
                            "rtt_max_us",
                        )
                    },
                }
            )
    note = f"Each run's {TCP_FLOWS_SHOWN} first of its {', '.join(map(str, counts))} flows with payload."
    return out, note if any(n > TCP_FLOWS_SHOWN for n in counts) else ""


def _topology(rows: Rows) -> tuple[Rows, str]:
    """nccl_topology's edges, each pair and its ranks written as one column, data in MB."""
    out = []
    for r in rows:
        out.append(
            {
                **{k: r[k] for k in ("run", "algorithm", "verdict", "ring", "tree", "transport", "measured")},
                "pair": f"{r['src_worker'] or '?'}→{r['dst_worker'] or '?'}",
                "rank_pair": f"{r['src_rank']}→{r['dst_rank']}",
                "data_mb": _mb(r["data_bytes"]),
                **{k: r[k] for k in ("data_frames", "flows", "status", "contradicts")},
            }
        )
    return out, ""


# the GPU section's tables, under its step breakdown and collective timeline
GPU_TABLES = (
    Table(
        "step_breakdown",
        "Step breakdown per worker",
        "Each worker's profiled steps: the iteration's wall time (the host's ProfilerStep), the step's "
        "span on the GPU and what ran in it — compute, communication (hidden by compute, or exposed: "
        "the step waited on it) — and GPU idle time, as Holistic Trace Analysis splits it.",
        [
            "run", "worker", "rank", "step", "timed_by", "iteration_ms", "step_ms", "compute_ms",
            "communication_ms", "overlap_ms", "exposed_ms", "gpu_idle_ms", "gpu_idle_pct",
            "iteration_idle_pct",
        ],
        shown_when=has_collectives,
        pick=_steps,
    ),
    Table(
        "collective_stragglers",
        "Stragglers: collectives whose ranks started apart",
        "A collective completes only when its last rank joins: the spread is how long the first rank "
        "waited for it, the wait all ranks' waiting together; the call spread compares the host-side "
        "calls (a rank late to call was late in its own compute or data loading).",
        [
            "run", "source", "op", "bytes", "step", "ranks", "late_rank", "spread_ms", "wait_ms",
            "call_spread_ms", "last_caller_rank",
        ],
        shown_when=has_collectives,
        pick=_stragglers,
    ),
    Table(
        "tcp_health",
        "TCP health of the flows that carried data",
        "Retransmissions, out-of-order segments, duplicate ACKs, zero windows and full windows by "
        "tshark's rules, and the round-trip time of ACKed segments (two hosts' clocks apart where the "
        "two directions were captured on different hosts).",
        [
            "run", "flow", "payload_mb", "data_packets", "retransmissions", "out_of_order", "dup_acks",
            "zero_window", "window_full", "rtt_median_us", "rtt_max_us",
        ],
        shown_when=_gpu_run,
        pick=_tcp_health,
    ),
    Table(
        "nccl_topology",
        "NCCL's declared topology against the wire",
        "Each directed worker pair NCCL's logs declare (ring, tree) or the capture shows carrying "
        "NCCL's data; the verdict is per run: the measured graph equals the declared one.",
        [
            "run", "algorithm", "verdict", "pair", "rank_pair", "ring", "tree", "transport", "measured",
            "data_mb", "data_frames", "flows", "status", "contradicts",
        ],
        shown_when=has_nccl_logs,
        pick=_topology,
    ),
)  # fmt: skip

# the tables under the figures
TABLES = (
    Table(
        "throughput_ci",
        "Throughput with 95% confidence interval",
        "All traffic of each run in one-second samples over the whole run (complete seconds only); "
        "{method}, lower bounds clipped at 0 Gbit/s. The paper's Table I took seconds 200–300.",
        ["run", "from_s", "to_s", "n", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    ),
    Table(
        "link_util_ci",
        "Link throughput with 95% confidence interval",
        "Each directed worker link in one-second windows; {method}, lower bounds clipped at 0 Gbit/s. "
        "The paper's Table II took W1→W2 from 90 s to 120 s.",
        ["run", "src_worker", "dst_worker", "windows", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    ),
    Table(
        "data_per_step",
        "Data per training step",
        "Bytes between the first and last logged step, per step; each rank's payload against the "
        "ring all-reduce's 2(N−1)/N × gradient bytes (the input of the paper's Sec. VI model).",
        [
            "run", "n_workers", "steps", "step_s", "mb_per_step", "rank_payload_per_step",
            "expected_rank_bytes", "payload_ratio",
        ],
    ),
    Table(
        "flow_counts",
        "Flows per run",
        "The paper's directed 4-tuple count next to 5-tuple, bidirectional connection, host-pair and"
        " RDMA queue-pair counts.",
        ["run", "definition", "flows"],
    ),
    # after the figure rdma_ops, for runs with RoCE packets only
    Table(
        "rdma_flows",
        "RDMA queue-pair flows",
        "Per run and directed (source, destination, destination QP): packets, frame and message bytes, "
        "operation mix, PSN gaps/repeats/rewinds, NAKs, ECN-CE marks and CNPs; the source QP from the "
        "paired direction (same UDP source port) or UD's DETH.",
        [
            "run", "src_worker", "dst_worker", "src_ip", "dst_ip", "dest_qp", "src_qp", "transport",
            "packets", "bytes", "message_bytes", "writes", "sends", "read_requests", "read_responses",
            "atomics", "acks", "cnps", "naks", "ecn_ce", "psn_gaps", "psn_repeats", "psn_rewinds",
        ],
        shown_when=has_rdma,
    ),
)  # fmt: skip

QP_COLUMNS = ("dest_qp", "src_qp")  # shown in hex, as tshark and `tracecore read` write them

RUN_COLUMNS = [
    "run", "framework", "model", "optimizer", "batch_size", "backend", "loss_pct", "topology",
    "workers", "packets", "bytes", "duration_s", "log_steps", "grad_bytes",
]  # fmt: skip

# column headings people read (units in brackets); a column not named here keeps its view name
HEADINGS = {
    "run": "Run", "framework": "Framework", "model": "Model", "optimizer": "Optimizer",
    "batch_size": "Batch", "backend": "Backend", "loss_pct": "Loss [%]", "topology": "Topology",
    "workers": "Workers", "n_workers": "Workers", "packets": "Packets", "bytes": "Bytes",
    "duration_s": "Duration [s]", "log_steps": "Logged steps", "grad_bytes": "Gradient [B]",
    "from_s": "From [s]", "to_s": "To [s]", "n": "Samples", "windows": "Windows",
    "mean_gbps": "Mean [Gbit/s]", "ci_low_gbps": "95% CI low [Gbit/s]",
    "ci_high_gbps": "95% CI high [Gbit/s]",
    "src_worker": "Sender", "dst_worker": "Receiver", "steps": "Steps", "step_s": "Step [s]",
    "mb_per_step": "Data per step [MB]", "rank_payload_per_step": "Payload per rank per step [B]",
    "expected_rank_bytes": "2(N−1)/N × gradient [B]", "payload_ratio": "Measured / expected",
    "definition": "Flow definition", "flows": "Flows", "src_ip": "Source IP", "dst_ip": "Destination IP",
    "dest_qp": "Destination QP", "src_qp": "Source QP", "transport": "Transport",
    "message_bytes": "Message bytes",
    # GPU section
    "worker": "Worker", "rank": "Rank", "step": "Step", "timed_by": "Timed by",
    "iteration_ms": "Iteration [ms]", "step_ms": "GPU span [ms]", "compute_ms": "Compute [ms]",
    "communication_ms": "Communication [ms]", "overlap_ms": "Hidden by compute [ms]",
    "exposed_ms": "Exposed [ms]", "gpu_idle_ms": "GPU idle [ms]", "gpu_idle_pct": "GPU idle of the span [%]",
    "iteration_idle_pct": "GPU idle of the iteration [%]",
    "source": "Source", "op": "Collective", "ranks": "Ranks", "late_rank": "Started last",
    "spread_ms": "Spread [ms]", "wait_ms": "All ranks' wait [ms]", "call_spread_ms": "Call spread [ms]",
    "last_caller_rank": "Called last (rank)",
    "flow": "Flow (sender:port→receiver:port)", "payload_mb": "Payload [MB]", "data_packets": "Data packets",
    "retransmissions": "Retransmissions", "out_of_order": "Out of order", "dup_acks": "Dup ACKs",
    "zero_window": "Zero window", "window_full": "Window full", "rtt_median_us": "RTT median [µs]",
    "rtt_max_us": "RTT max [µs]",
    "algorithm": "Algorithm", "verdict": "Run agrees", "pair": "Pair", "rank_pair": "Ranks",
    "ring": "Ring", "tree": "Tree", "measured": "Data on the wire", "data_mb": "Data [MB]",
    "data_frames": "Data frames", "status": "Status", "contradicts": "Contradicts the log",
}  # fmt: skip


def table_rows(table: Table, result: pa.Table) -> tuple[pa.Table | Rows, str]:
    """The rows `table` shows of its view's `result`, and the note its caption gets."""
    if table.pick is None:
        return result, ""
    return table.pick(result.to_pylist())


def html_table(table: pa.Table | Rows, columns: list[str], labels: dict[str, str] | None = None) -> str:
    """A plain HTML table of `columns` under readable headings, numbers right-aligned in one format
    (`style.number`); run names as `labels` shortens them, the full name in the cell's tooltip."""
    labels = labels or {}
    if isinstance(table, list):
        names = list(dict.fromkeys(k for r in table for k in r)) if table else list(columns)
        cols = [c for c in columns if c in names]
        values = [{c: r.get(c) for c in cols} for r in table]
        numeric = {c: _numbers(v[c] for v in values) for c in cols}
    else:
        import pyarrow as pa

        cols = [c for c in columns if c in table.column_names]
        values = table.select(cols).to_pylist()
        numeric = {
            c: pa.types.is_integer(table.schema.field(c).type)
            or pa.types.is_floating(table.schema.field(c).type)
            for c in cols
        }
    head = "".join(
        f'<th class="{"" if numeric[c] else "text"}" title="{html.escape(c)}">'
        f"{html.escape(HEADINGS.get(c, c))}</th>"
        for c in cols
    )
    body = []
    for row in values:
        cells = []
        for c in cols:
            value = row[c]
            if c == "run" and value in labels:
                cells.append(
                    f'<td class="text run" title="{html.escape(value)}">{html.escape(labels[value])}</td>'
                )
            else:
                cells.append(f'<td class="{"" if numeric[c] else "text"}">{html.escape(_fmt(value, c))}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not body:
        body.append(f'<tr><td class="text" colspan="{len(cols)}">no rows for the selected runs</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _numbers(values: Any) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)


def _fmt(value: Any, column: str = "") -> str:
    from tracecore.figures.style import number

    if column in QP_COLUMNS and isinstance(value, int):
        return f"0x{value:06x}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return number(value)
