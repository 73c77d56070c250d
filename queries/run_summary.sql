-- One row per run: its metadata next to what was captured and logged (the report's run table).
-- Kind: answer
-- Key: run
-- Headline: workers, packets, bytes, duration_s, log_steps
-- Partition: run
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns: every column of `run_meta`, plus
--   workers       workers of the run
--   packets       packets captured (each counted once)
--   bytes         sum of frame_len, bytes
--   start_ns, end_ns   first and last packet, UTC ns
--   duration_s    end_ns − start_ns, seconds
--   log_steps     Batch rows in the training log (0 without one)
CREATE OR REPLACE MACRO run_summary(runs := NULL) AS TABLE
WITH
cap AS (
    SELECT run, count(*) AS packets, sum(frame_len)::BIGINT AS bytes, min(ts_ns) AS start_ns, max(ts_ns) AS end_ns
    FROM packets
    WHERE runs IS NULL OR list_contains(runs, run)
    GROUP BY run
),
w AS (SELECT run, count(*) AS workers FROM workers GROUP BY run),
l AS (SELECT run, count(*) FILTER (WHERE type = 'Batch') AS log_steps FROM train_log GROUP BY run)
SELECT m.*, coalesce(w.workers, 0) AS workers, coalesce(cap.packets, 0) AS packets, coalesce(cap.bytes, 0) AS bytes,
       cap.start_ns, cap.end_ns, (cap.end_ns - cap.start_ns) / 1e9 AS duration_s,
       coalesce(l.log_steps, 0) AS log_steps
FROM run_meta AS m
LEFT JOIN cap ON cap.run = m.run
LEFT JOIN w ON w.run = m.run
LEFT JOIN l ON l.run = m.run
WHERE runs IS NULL OR list_contains(runs, m.run)
ORDER BY m.run;

CREATE OR REPLACE VIEW run_summary AS SELECT * FROM run_summary();
