-- Rows of a zero-filled grid of time bins × series over the runs asked for, estimated from the small tables.
-- Kind: building block
-- Partition: none
--
-- Why: `link_series` and `link_ci` fill every bin (or window) of every series with zeros, and DuckDB
-- materialises that grid: `link_util(bin_ns := 1000)` in ad hoc SQL built 11.2 GB in 37.8 s. This
-- estimate reads only `captures` and `workers`, so they refuse (grid_check) before a packet is read,
-- and `tracecore query` refuses the same estimate with the smallest bin that fits (tracecore/query.py).
-- It bounds the grid from above: a run's span is its captures' first to last packet (or the window),
-- plus two bins for the edges; its series are every ordered worker pair (by_pair) or the run itself.
--
-- Parameters:
--   bin_ns   bin or window width, ns
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
--   by_pair  true = a series per ordered worker pair, false = a series per run (default true)
-- Columns:
--   rows       Σ over runs of (span // bin_ns + 2) × series
--   seconds    Σ of the runs' spans, s
--   weighted   Σ of span × series, ns (the smallest bin that fits: weighted / (max rows − fixed))
--   fixed      Σ of 2 × series (the edge bins)
CREATE OR REPLACE MACRO grid_rows(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL,
                                  by_pair := true) AS TABLE
WITH
spans AS (
    SELECT c.run, max(c.last_ts_ns) - min(c.first_ts_ns) AS span, any_value(w.n) AS workers
    FROM captures AS c
    JOIN (SELECT run, count(*) AS n FROM workers GROUP BY run) AS w ON w.run = c.run
    WHERE c.first_ts_ns IS NOT NULL AND (runs IS NULL OR list_contains(runs, c.run))
    GROUP BY c.run
),
sized AS (
    SELECT greatest(CASE WHEN to_ns IS NULL THEN span ELSE least(to_ns::BIGINT, span) END
                    - coalesce(from_ns::BIGINT, 0), 0) AS span_ns,
           CASE WHEN by_pair THEN greatest(workers * (workers - 1), 1) ELSE 1 END AS series
    FROM spans
)
SELECT
    coalesce(sum((span_ns // bin_ns::BIGINT + 2) * series), 0)::HUGEINT AS rows,
    coalesce(sum(span_ns), 0) / 1e9 AS seconds,
    coalesce(sum(span_ns::HUGEINT * series), 0)::HUGEINT AS weighted,
    coalesce(sum(2 * series), 0)::BIGINT AS fixed
FROM sized;

CREATE OR REPLACE VIEW grid_rows AS SELECT * FROM grid_rows();
