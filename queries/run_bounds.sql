-- First and last packet of each run, and the analysis window every windowed view measures from.
-- Kind: building block
-- Partition: run
--
-- Why: every time axis in tracecore starts at the run's first packet (integer UTC ns), never at a
-- local-time string; `from_ns`/`to_ns` are offsets from that origin, so "seconds 200–300 of the run"
-- means the same thing in every view.
--
-- Parameters:
--   runs     list of run names (VARCHAR[]); NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = 0
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = just past the last packet
-- Columns:
--   run          run name
--   start_ns     first packet of the run, UTC ns
--   end_ns       last packet of the run, UTC ns
--   lo_ns        window start, UTC ns (start_ns + from_ns)
--   hi_ns        window end, exclusive, UTC ns (clipped to end_ns + 1)
--   duration_s   end_ns − start_ns, seconds
--   packets      packets in the whole run
CREATE OR REPLACE MACRO run_bounds(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
SELECT
    run,
    start_ns,
    end_ns,
    start_ns + greatest(coalesce(from_ns::BIGINT, 0), 0) AS lo_ns,
    least(end_ns + 1, start_ns + coalesce(to_ns::BIGINT, end_ns + 1 - start_ns)) AS hi_ns,
    (end_ns - start_ns) / 1e9 AS duration_s,
    packets
FROM (
    SELECT run, min(ts_ns) AS start_ns, max(ts_ns) AS end_ns, count(*) AS packets
    FROM packets
    WHERE runs IS NULL OR list_contains(runs, run)
    GROUP BY run
)
ORDER BY run;

CREATE OR REPLACE VIEW run_bounds AS SELECT * FROM run_bounds();
