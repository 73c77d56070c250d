-- The size check of a zero-filled grid (time bins × series): at most 5 000 000 rows, else one line.
-- Kind: building block
-- Partition: none
--
-- Why: `link_series`, `link_ci` and `temporal_flows` fill every bin of every series with zeros, and
-- DuckDB materialises that grid: `link_util(bin_ns := 1000)` in ad hoc SQL built 11.2 GB in 37.8 s.
-- Each sizes its grid first (`grid_rows`, from the small tables, or its own count) and calls the
-- scalar macro grid_check(rows, bin_ns), which is 0 when the grid fits and stops the query with one
-- line when it does not. The view holds the limit; `tracecore query` refuses the same estimate
-- earlier, naming the smallest bin that fits (tracecore/query.py).
--
-- Parameters: of the scalar macro grid_check(rows, bin_ns); the view takes none
--   rows     the grid's rows
--   bin_ns   the bin or window width, ns (for the message)
-- Columns:
--   max_rows   rows a grid may have (about 300 B each in DuckDB)
CREATE OR REPLACE VIEW grid_check AS SELECT 5000000::BIGINT AS max_rows;

CREATE OR REPLACE MACRO grid_check(rows, bin_ns) AS
CASE WHEN rows > (SELECT max_rows FROM grid_check)
     THEN error(format('tracecore: bins of {:,} ns would make a grid of about {:,} rows (bins × series; at '
                       || 'most {:,}): use larger bins (bin_ns, window_ns), fewer runs (runs := [...]) or a '
                       || 'window (from_ns, to_ns)', bin_ns, rows, (SELECT max_rows FROM grid_check)))
     ELSE 0
END;
