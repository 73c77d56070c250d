-- The packets of the selected runs inside the analysis window: the shared input of the windowed views.
-- Kind: building block
-- Partition: run
--
-- Why a macro: with no window the run bounds are never computed (the second branch is planned
-- as an empty result), so views that need no timestamps read no timestamps; DuckDB pushes the
-- caller's column list through both branches, so only the columns a view uses are read.
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns: every column of `packets` (see ARCHITECTURE.md, "Contracts between stages").
CREATE OR REPLACE MACRO packets_window(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
SELECT p.*
FROM packets AS p
WHERE from_ns IS NULL AND to_ns IS NULL AND (runs IS NULL OR list_contains(runs, p.run))
UNION ALL
SELECT p.*
FROM packets AS p
JOIN run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns) AS w ON p.run = w.run
WHERE (from_ns IS NOT NULL OR to_ns IS NOT NULL)
    AND (runs IS NULL OR list_contains(runs, p.run))
    AND p.ts_ns >= w.lo_ns AND p.ts_ns < w.hi_ns;

CREATE OR REPLACE VIEW packets_window AS SELECT * FROM packets_window();
