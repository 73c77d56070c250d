-- Each logged training step of each run as a time span: step k runs after Batch row k−1 up to row k.
-- Kind: building block
-- Partition: run
--
-- Batch rows are numbered 0, 1, … in time order over the whole run (epochs restart the log's ID;
-- this count does not), the numbering of PyTorch's ProfilerStep#N when the profiler starts with
-- training. Step 0 has no start (nothing logs when training begins) and so no row.
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns:
--   run, step
--   start_ns   the previous Batch row's time, UTC ns
--   end_ns     this Batch row's time, UTC ns
CREATE OR REPLACE MACRO train_steps(runs := NULL) AS TABLE
SELECT run, step, start_ns, end_ns
FROM (
    SELECT run, row_number() OVER (PARTITION BY run ORDER BY ts_ns, id) - 1 AS step,
           lag(ts_ns) OVER (PARTITION BY run ORDER BY ts_ns, id) AS start_ns, ts_ns AS end_ns
    FROM train_log
    WHERE type = 'Batch' AND (runs IS NULL OR list_contains(runs, run))
)
WHERE start_ns IS NOT NULL AND start_ns < end_ns;

CREATE OR REPLACE VIEW train_steps AS SELECT * FROM train_steps();
