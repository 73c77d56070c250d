"""What the selected runs hold that a figure or table needs: RoCE packets, collectives placed in time,
NIC counters, NCCL's logs, two runs or more. A report asks before it draws a part that would be empty.

Why apart from the registry: these are small queries, no chart; the report asks them, and starts its
tables' views, before it imports Altair (`registry` imports every chart builder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracecore.figures._views import run_view, shared

if TYPE_CHECKING:
    import duckdb

Runs = list[str] | None


def any_row(con: duckdb.DuckDBPyConnection, runs: Runs, sql: str) -> bool:
    """Whether `sql` (a SELECT with a WHERE) finds a row of one of `runs` (None = all); asked once
    per report (`_views.shared`)."""

    def ask() -> bool:
        if runs is None:
            return bool(con.execute(f"SELECT EXISTS ({sql})").fetchall()[0][0])
        found = con.execute(f"SELECT EXISTS ({sql} AND list_contains($runs, run))", {"runs": runs})
        return bool(found.fetchall()[0][0])

    return shared(("any_row", sql, None if runs is None else tuple(runs)), ask)


def has_rdma(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether any of `runs` (None = all) holds a RoCE packet: the report's RDMA section needs one."""
    return any_row(con, runs, "SELECT 1 FROM packets WHERE rdma_opcode IS NOT NULL")


def has_counters(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether any of `runs` (None = all) has NIC counters: the report's NIC figure needs them."""
    return any_row(con, runs, "SELECT 1 FROM counters WHERE true")


def has_congestion_counters(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether any of `runs` (None = all) has a RoCE congestion counter (CNPs, ECN marks, PFC pauses,
    sequence errors, timeouts) and logged steps: the report's congestion figure needs both."""
    return any_row(
        con,
        runs,
        "SELECT 1 FROM counters WHERE (counter IN ('np_cnp_sent', 'rp_cnp_handled',"
        " 'np_ecn_marked_roce_packets', 'out_of_sequence', 'packet_seq_err', 'local_ack_timeout_err')"
        " OR (source = 'ethtool' AND regexp_matches(counter, '^(rx|tx)_prio[0-7]_pause$')))"
        " AND run IN (SELECT run FROM train_log)",
    )


def has_nccl_logs(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether any of `runs` (None = all) has NCCL's INFO logs: the report's topology table needs them."""
    return any_row(con, runs, "SELECT 1 FROM nccl_ranks WHERE true")


def has_collectives(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether any of `runs` (None = all) has a collective placed in time: the report's timeline needs one."""
    return any_row(con, runs, "SELECT 1 FROM collectives WHERE start_ns IS NOT NULL")


def several_runs(con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    """Whether the selection holds two runs or more: a comparison needs them."""
    return run_view(con, "run_bounds", runs=runs).num_rows > 1
