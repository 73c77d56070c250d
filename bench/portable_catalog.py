"""What the portable catalog costs: DuckDB 1.5's storage format, and part paths named twice in the view.

    python -m bench.portable_catalog [--parts 2000] [--reps 5]

(1) A catalog commit (views installed, no template) of the embedded sample's state, written in the
storage format of DuckDB 1.5 (today) and of the running DuckDB (before): best time and file size.
(2) `SELECT count(*) FROM packets_all` over `--parts` part files (hard links to one real part file):
the view naming each path twice (absolute, or relative under file_search_path: today) against
absolute paths only (before). Results go to bench/results/portable-catalog.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def best(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def commit_cost(work: Path, reps: int) -> list[tuple[str, float, int]]:
    """Best commit time and catalog size for each storage version."""
    import duckdb

    from tracecore.ingest import catalog, ingest
    from tracecore.sample import sample_root

    data = work / "data"
    assert not ingest([sample_root()], data, jobs=1).failed
    state = catalog.load_state(data)
    rows = []
    today = catalog.STORAGE_VERSION
    for label, version in [(f"{today} (today)", today), (f"v{duckdb.__version__} (before)", "latest")]:
        catalog.STORAGE_VERSION = version
        try:
            seconds = best(lambda: catalog.commit_catalog(data, state), reps)
        finally:
            catalog.STORAGE_VERSION = today
        rows.append((label, seconds, (data / catalog.CATALOG_NAME).stat().st_size))
    return rows


def view_cost(work: Path, parts: int, reps: int) -> list[tuple[str, float, int]]:
    """Best `count(*)` time over `parts` files and the view's SQL length, both ways of naming them."""
    import duckdb

    from tracecore.ingest import catalog

    src = next((work / "data" / "packets").rglob("part-*.parquet"))
    root = work / "many"
    files = [f"packets/run=r/worker=W{i % 64}/part-{i}.parquet" for i in range(parts)]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(src, root / rel)
    import pyarrow.parquet as pq

    from tracecore.schema import LAYER_COLUMNS

    lean = LAYER_COLUMNS[0] not in pq.read_schema(src).names  # a dense part (schema version 4)
    both = catalog.packets_all_sql(root, files, dense=frozenset(files) if lean else frozenset())
    absolute = re.sub(
        r"CASE WHEN current_setting\('file_search_path'\) <> '' THEN \[[^]]*\] WHEN .*? THEN (\[[^]]*\])"
        r" ELSE error\(.*\) END,",
        r"\1,",
        both,
        count=1,
    )
    assert absolute != both
    rows = []
    for label, sql in [("absolute or relative (today)", both), ("absolute only (before)", absolute)]:
        con = duckdb.connect()
        con.execute(f"SET VARIABLE {catalog.ROOT_VARIABLE} = $root", {"root": str(root)})  # the folder
        con.execute("CREATE VIEW packets_all AS " + sql)
        seconds = best(lambda con=con: con.execute("SELECT count(*) FROM packets_all").fetchone(), reps)
        con.close()
        rows.append((label, seconds, len(sql)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    import duckdb

    work = Path(tempfile.mkdtemp(prefix="tracecore-bench-portable-"))
    os.environ["TRACECORE_CACHE_DIR"] = ""  # every commit installs the views: the template is off
    try:
        commits = commit_cost(work, args.reps)
        views = view_cost(work, args.parts, args.reps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "# Portable catalog: what DuckDB 1.5's storage format and twice-named part paths cost",
        "",
        f"`python -m bench.portable_catalog --parts {args.parts} --reps {args.reps}`, DuckDB "
        f"{duckdb.__version__}, best of {args.reps}, on the shared 2-core development machine.",
        "",
        "| catalog commit of the sample (views installed, no template) | best | catalog size |",
        "|---|---:|---:|",
        *[f"| storage {label} | {s * 1000:.1f} ms | {size / 1024:.0f} KiB |" for label, s, size in commits],
        "",
        f"| `SELECT count(*) FROM packets_all`, {args.parts} part files | best | view SQL |",
        "|---|---:|---:|",
        *[f"| {label} | {s * 1000:.1f} ms | {n / 1024:.0f} KiB |" for label, s, n in views],
        "",
    ]
    out = REPO / "bench" / "results" / "portable-catalog.md"
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
