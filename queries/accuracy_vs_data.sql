-- Cumulative data sent at each logged training step, next to the step's loss and accuracy (Fig. 8).
-- Kind: answer
-- Key: run, step
-- Headline: loss, accuracy, step_bytes, cum_bytes
-- Needs: training log
-- Partition: run
--
-- Semantics: the notebook shifted the log by +7200 s (UTC → CEST, to match tshark's local-time
-- strings), resampled bytes into bins of the mean step duration, took the cumulative sum and
-- paired bins with log rows by position, trimming by trial and error when the lengths differed.
-- Fixed here: log and packets are both integer UTC ns, and each Batch row gets exactly the bytes
-- of every packet of the run up to its own timestamp (an as-of join, no resampling, no shift).
-- Packets after the last logged step are not counted. Log timestamps are worker 0's clock.
--
-- Parameters:
--   runs   list of run names; NULL = every run with a training log
-- Columns:
--   run
--   step        1.. over the Batch rows of the run, in time order
--   epoch       0-based epoch the step belongs to (Epoch rows logged before it)
--   id          the log's batch index within its epoch
--   ts_ns       log timestamp, UTC ns
--   t_s         seconds after the run's first packet
--   loss, accuracy   as logged (Keras running means over the epoch so far)
--   step_bytes  frame bytes of all packets since the previous step, bytes
--   cum_bytes   frame bytes of all packets up to this step, bytes
--   cum_gb      cum_bytes / 1e9, GB
CREATE OR REPLACE MACRO accuracy_vs_data(runs := NULL) AS TABLE
WITH
logged AS (
    SELECT run, type, id, ts_ns, loss, accuracy,
           coalesce(sum(CASE WHEN type = 'Epoch' THEN 1 ELSE 0 END) OVER (
               PARTITION BY run ORDER BY ts_ns, type ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ), 0) AS epoch
    FROM train_log
    WHERE runs IS NULL OR list_contains(runs, run)
),
steps AS (
    SELECT run, row_number() OVER (PARTITION BY run ORDER BY ts_ns, id) AS step, epoch, id, ts_ns, loss, accuracy
    FROM logged
    WHERE type = 'Batch'
),
per_step AS (
    SELECT s.run, s.step, sum(p.frame_len)::BIGINT AS bytes
    FROM packets AS p
    ASOF JOIN steps AS s ON p.run = s.run AND p.ts_ns <= s.ts_ns
    WHERE runs IS NULL OR list_contains(runs, p.run)
    GROUP BY s.run, s.step
)
SELECT
    s.run,
    s.step,
    s.epoch::BIGINT AS epoch,
    s.id,
    s.ts_ns,
    (s.ts_ns - b.start_ns) / 1e9 AS t_s,
    s.loss,
    s.accuracy,
    coalesce(ps.bytes, 0)::BIGINT AS step_bytes,
    sum(coalesce(ps.bytes, 0)) OVER (PARTITION BY s.run ORDER BY s.step)::BIGINT AS cum_bytes,
    sum(coalesce(ps.bytes, 0)) OVER (PARTITION BY s.run ORDER BY s.step) / 1e9 AS cum_gb
FROM steps AS s
LEFT JOIN per_step AS ps ON ps.run = s.run AND ps.step = s.step
LEFT JOIN run_bounds(runs := runs) AS b ON b.run = s.run
ORDER BY s.run, s.step;

CREATE OR REPLACE VIEW accuracy_vs_data AS SELECT * FROM accuracy_vs_data();
