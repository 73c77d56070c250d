"""The view files as assets: kinds, references, the install order graphlib computes, and its errors."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tracecore import partition, query, views
from tracecore.errors import UsageError

REPO = Path(__file__).resolve().parent.parent

BUILDING_BLOCKS = (
    "collective_calls",
    "collective_clock_check_of",
    "collective_coverage_of",
    "collective_links",
    "collective_rank_workers",
    "collective_verdicts_of",
    "grid_check",
    "grid_rows",
    "link_ci",
    "link_series",
    "link_steady",
    "nccl_edges",
    "nccl_rank_workers",
    "nic_tx",
    "packets_window",
    "run_bounds",
    "run_meta",
    "tcp_segments",
    "train_steps",
    "train_window",
    "worker_pairs",
)


def write_views(folder: Path, files: dict[str, str], kind: str | None = views.ANSWER) -> views.ViewFolder:
    """A queries folder of plain views, `name: SELECT ...`, each with a purpose and (unless None) a kind."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, select in files.items():
        header = f"-- The {name} view.\n" + (f"-- Kind: {kind}\n" if kind else "")
        sql = f"{header}CREATE OR REPLACE VIEW {name} AS {select};\n"
        (folder / f"{name}.sql").write_text(sql, encoding="utf-8")
    return views.ViewFolder(folder)


def test_references_are_read_from_the_sql_not_the_comments() -> None:
    shipped = views.installed_views()
    assert shipped.references("link_util") == {"link_series"}
    assert shipped.references("link_series") == {"grid_check", "packets_window", "run_bounds", "worker_pairs"}
    assert shipped.references("flow_matrix_mean") == {"flow_matrix"}
    assert shipped.references("packets_window") == {"run_bounds"}
    # data_per_step's header mentions run_meta.grad_bytes; its SQL uses run_meta and train_window
    assert shipped.references("data_per_step") == {"nic_tx", "run_meta", "train_window"}
    assert shipped.references("run_bounds") == frozenset()
    # the RDMA views: rdma_flows' header names flow_matrix and link_util; its SQL uses neither
    assert shipped.references("rdma_flows") == {"packets_window"}
    assert shipped.references("congestion") == {"link_series", "packets_window", "worker_pairs"}


def test_install_order_puts_every_building_block_before_its_users() -> None:
    shipped = views.installed_views()
    order = shipped.install_order
    assert sorted(order) == list(views.view_names())
    for position, name in enumerate(order):
        assert shipped.references(name) <= set(order[:position]), name
    assert order.index("run_bounds") < order.index("packets_window") < order.index("link_series")
    assert order.index("link_series") < order.index("link_util")
    assert order.index("flow_matrix") < order.index("flow_matrix_mean")
    assert order.index("link_series") < order.index("congestion")
    assert order.index("link_steady") < order.index("contention")
    assert order.index("topology_check") < order.index("compare")
    assert order.index("tcp_segments") < order.index("tcp_health")
    assert order.index("collective_wire") < order.index("collective_verdicts") < order.index("findings")
    assert order.index("packets_window") < order.index("rdma_flows")


def test_building_blocks_are_marked_and_used_by_other_views() -> None:
    kinds = {name: views.view_kind(name) for name in views.view_names()}
    assert tuple(n for n, k in kinds.items() if k == views.BUILDING_BLOCK) == BUILDING_BLOCKS
    used = set().union(*(views.installed_views().references(n) for n in views.view_names()))
    assert set(BUILDING_BLOCKS) <= used
    assert kinds["flow_matrix"] == views.ANSWER  # used by flow_matrix_mean, but Fig. 4 itself


def test_listing_puts_answers_first_with_their_parameters() -> None:
    rows = query.view_listing()
    assert [r.name for r in rows[-len(BUILDING_BLOCKS) :]] == list(BUILDING_BLOCKS)
    assert {r.kind for r in rows[: -len(BUILDING_BLOCKS)]} == {views.ANSWER}
    by_name = {r.name: r for r in rows}
    assert by_name["link_util"].params == ("bin_ns", "runs", "from_ns", "to_ns")
    assert by_name["run_meta"] == query.ViewListing(
        "run_meta",
        views.BUILDING_BLOCK,
        "Run metadata with every optional column the views use present (NULL where ingest has none).",
        (),
    )


def test_a_folder_is_installed_in_dependency_order_not_name_order(tmp_path: Path) -> None:
    folder = write_views(
        tmp_path,
        {
            "a_top": "SELECT n * 10 AS n FROM b_mid",
            "b_mid": "SELECT n + 1 AS n FROM c_base",
            "c_base": "SELECT 4 AS n",
        },
    )
    assert folder.install_order == ("c_base", "b_mid", "a_top")
    con = duckdb.connect()
    folder.install(con)
    assert con.sql("SELECT n FROM a_top").fetchall() == [(50,)]


def test_circular_files_are_an_error_naming_them(tmp_path: Path) -> None:
    folder = write_views(
        tmp_path,
        {
            "ping": "SELECT * FROM pong",
            "pong": "SELECT * FROM ping",
            "alone": "SELECT 1 AS n",
        },
    )
    with pytest.raises(UsageError, match="reference each other in a circle") as err:
        folder.install(duckdb.connect())
    assert str(tmp_path / "ping.sql") in str(err.value)
    assert str(tmp_path / "pong.sql") in str(err.value)
    assert "alone.sql" not in str(err.value)


def test_a_reference_to_a_missing_view_names_the_file(tmp_path: Path) -> None:
    folder = write_views(
        tmp_path,
        {"lonely": "SELECT * FROM no_such_view"},
    )
    with pytest.raises(UsageError, match="no_such_view") as err:
        folder.install(duckdb.connect())
    assert str(err.value).startswith(f"{tmp_path / 'lonely.sql'} cannot be installed: Catalog Error")


def test_a_file_without_a_kind_line_is_an_error(tmp_path: Path) -> None:
    folder = write_views(tmp_path, {"bare": "SELECT 1 AS n"}, kind=None)
    with pytest.raises(UsageError, match=r"bare\.sql: header needs a line '-- Kind: answer'"):
        folder.kind("bare")


def test_every_view_declares_how_it_splits_by_run() -> None:
    """Each file says `-- Partition: run` or `-- Partition: none` (a new view without one fails here),
    and the rules that make a split exact hold (partition.check)."""
    rules = {name: partition.rules(name) for name in views.view_names()}
    # baselines of other runs; a grid's size over every run asked for, and its limit
    assert {n for n, r in rules.items() if not r.by_run} == {
        "compare",
        "train_duration",
        "findings",  # what loss did to training time is train_duration's
        "grid_rows",
        "grid_check",
    }
    assert {n: r.combines for n, r in rules.items() if r.combines} == {"flow_matrix_mean": "flow_matrix"}
    shipped = views.installed_views()
    assert partition.order_keys(shipped, "flow_matrix")[:2] == ["a.run", "src_worker NULLS LAST"]
    assert partition.order_keys(shipped, "link_series") == []  # unordered rows
    assert partition.order_keys(shipped, "train_duration")[0] == "d.framework"


def _folder(tmp_path: Path, files: dict[str, tuple[str, str]]) -> views.ViewFolder:
    """A queries folder of `name: (extra header lines, SQL body)`, each with a purpose and a kind."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, (header, body) in files.items():
        text = f"-- The {name} view.\n-- Kind: answer\n{header}--\n{body}\n"
        (tmp_path / f"{name}.sql").write_text(text, encoding="utf-8")
    return views.ViewFolder(tmp_path)


PER_RUN = "CREATE OR REPLACE MACRO base(runs := NULL) AS TABLE SELECT 'r' AS run, 1 AS n ORDER BY run;"


@pytest.mark.parametrize(
    ("header", "body", "error"),
    [
        ("", PER_RUN, r"header needs a line '-- Partition: run' .* got None"),
        ("-- Partition: runs\n", PER_RUN, r"header needs a line '-- Partition: run' .* got 'runs'"),
        ("-- Partition: Run\n", PER_RUN, r"got 'Run'"),
        (
            "-- Partition: run\n",
            "CREATE OR REPLACE MACRO base(runs := NULL) AS TABLE\n"
            "SELECT run, n FROM (SELECT 'r' AS run, 1 AS n ORDER BY run) ORDER BY n, run;",
            r"orders them by run first .* got ORDER BY n, run",
        ),
    ],
)
def test_a_bad_partition_line_names_the_file(tmp_path: Path, header: str, body: str, error: str) -> None:
    folder = _folder(tmp_path, {"base": (header, body)})
    with pytest.raises(UsageError, match=error) as err:
        partition.check(folder, "base")
    assert str(err.value).startswith(f"{tmp_path / 'base.sql'}: ")


def test_run_first_orders_and_unordered_views_split(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        {
            "base": ("-- Partition: run\n", PER_RUN.replace("ORDER BY run", "ORDER BY b.run DESC, n")),
            "plain": ("-- Partition: run\n", "CREATE OR REPLACE VIEW plain AS SELECT 'r' AS run;"),
            "across": ("-- Partition: none\n", "CREATE OR REPLACE VIEW across AS SELECT 1 AS n ORDER BY n;"),
        },
    )
    assert partition.check(folder, "base") == partition.Partitioning(by_run=True)
    assert partition.check(folder, "plain") == partition.Partitioning(by_run=True)
    assert partition.check(folder, "across") == partition.Partitioning(by_run=False)


COMBINING = "CREATE OR REPLACE MACRO top(runs := NULL) AS TABLE SELECT sum(n) AS n FROM base(runs := runs);"


@pytest.mark.parametrize(
    ("header", "body", "error"),
    [
        ("-- Partition: run\n-- Combine: base\n", COMBINING, None),
        ("-- Partition: none\n-- Combine: base\n", COMBINING, r"'Combine: base' needs '-- Partition: run'"),
        (
            "-- Partition: run\n-- Combine: nothing\n",
            COMBINING,
            r"reads only the view it combines \(nothing\)",
        ),
        (
            "-- Partition: run\n-- Combine: base\n",
            COMBINING.replace("FROM base", "FROM other, base"),
            r"reads only the view it combines \(base\); it reads base, other",
        ),
        (
            "-- Partition: run\n-- Combine: base\n",
            COMBINING.replace("base(runs := runs)", "base(runs := ['r'])"),
            r"calls it with each passed through",
        ),
        (
            "-- Partition: run\n-- Combine: base\n",
            COMBINING.replace("top(runs := NULL)", "top(runs := NULL, k := 1)"),
            r"has the parameters of base \(runs\)",
        ),
        (
            "-- Partition: run\n-- Combine: across\n",
            COMBINING.replace("base", "across"),
            r"combines across, which",
        ),
    ],
)
def test_a_combining_view_follows_the_rules(
    tmp_path: Path, header: str, body: str, error: str | None
) -> None:
    folder = _folder(
        tmp_path,
        {
            "top": (header, body),
            "base": ("-- Partition: run\n", PER_RUN),
            "other": ("-- Partition: run\n", "CREATE OR REPLACE VIEW other AS SELECT 'r' AS run;"),
            "across": (
                "-- Partition: none\n",
                "CREATE OR REPLACE MACRO across(runs := NULL) AS TABLE SELECT 1 AS n;",
            ),
        },
    )
    if error is None:
        assert partition.check(folder, "top") == partition.Partitioning(by_run=True, combines="base")
        return
    with pytest.raises(UsageError, match=error) as err:
        partition.check(folder, "top")
    assert str(err.value).startswith(f"{tmp_path / 'top.sql'}: ")


def test_every_answer_declares_its_key_and_headline_among_its_columns() -> None:
    """A table shows the key and the answer first (tracecore.columns); a name that is no column would
    silently drop the answer from the table."""
    from tracecore import needs

    for name in views.view_names():
        key, headline = views.view_header_list(name, "Key"), views.view_header_list(name, "Headline")
        columns = views.view_column_units(name)
        if views.view_kind(name) == views.ANSWER:
            assert headline, f"{name}: no '-- Headline:' line"
            assert key, f"{name}: no '-- Key:' line"
        assert {*key, *headline} <= set(columns), (name, {*key, *headline} - set(columns))
        assert not set(key) & set(headline), name
        needs.check_needs(views.view_header_list(name, "Needs"), name)
    breakdown = views.view_header_list("step_breakdown", "Headline")
    assert breakdown[:4] == ("compute_ns", "communication_ns", "overlap_ns", "exposed_ns")
    idle = [c for c in views.view_column_units("step_breakdown") if c in ("gpu_idle_ns", "idle_ns")]
    assert set(idle) <= set(breakdown)  # the GPU's idle time, where the view has it, is part of the answer
    assert views.view_header_list("tcp_health", "Headline") == (
        "retransmissions",
        "dup_acks",
        "rtt_median_us",
    )
    assert views.view_header_list("collective_wire", "Headline") == ("bytes", "ratio", "gbps", "busy_ns")


def test_column_units_are_read_from_the_columns_section() -> None:
    wire = views.view_column_units("collective_wire")
    assert (wire["start_ns"], wire["busy_ns"], wire["bytes"], wire["gbps"]) == (
        "UTC ns",
        "ns",
        "bytes",
        "Gbit/s",
    )
    assert (wire["frames"], wire["window_frames"], wire["ratio"], wire["src_worker"]) == (None,) * 4
    assert wire["window_bytes"] == wire["message_bytes"] == "bytes"
    tcp = views.view_column_units("tcp_health")
    assert tcp["rtt_min_us"] == tcp["rtt_max_us"] == "microseconds"  # an entry of three names, one unit
    assert tcp["window_scale"] is None  # its meaning goes on over a second line, with no unit
    assert views.view_column_units("link_util")["t_s"] is None  # 'seconds after …' is not a unit
    assert views.view_column_units("run_summary")["duration_s"] == "seconds"  # after 'every column of …'


def test_every_need_points_at_a_section_that_exists() -> None:
    from tracecore import needs

    for name, need in needs.NEEDS.items():
        file, section = need.guide
        headings = [
            line.lstrip("#").strip()
            for line in (REPO / file).read_text().splitlines()
            if line.startswith("#")
        ]
        assert section in headings, (name, file, section)
