-- Training duration per run from its training log, normalized to the 0%-loss run of the same configuration (Fig. 10).
-- Kind: answer
-- Key: run, loss_pct
-- Headline: duration_s, normalized, baseline_s
-- Needs: training log
-- Partition: none
--
-- Semantics: the notebook computed (Timestamp.max − Timestamp.min)/60 over train_history.log and
-- divided by the minimum over the plotted runs. Fixed here: each run is divided by the mean
-- duration of the runs with loss_pct = 0 that share its configuration (framework, model,
-- optimizer, batch_size, backend, topology, n_workers), looked up among all runs of the catalog,
-- so a faster lossy run cannot become the baseline and no baseline means NULL, not a guess.
-- Not split by run on a Dask cluster (`Partition: none`): a run's baseline comes from other runs,
-- so `query --scheduler` runs it where the catalog is read (it reads only the small tables).
-- Durations come from integer-ns log timestamps (worker 0's clock).
--
-- Parameters:
--   runs   list of run names; NULL = every run with a training log
-- Columns:
--   run, framework, model, optimizer, batch_size, backend, topology, n_workers, loss_pct
--   steps          Batch rows in the log
--   duration_s     last − first log timestamp (Batch and Epoch rows), seconds
--   baseline_s     mean duration of the same configuration's 0%-loss runs, seconds; NULL if none
--   baseline_runs  how many runs that mean is over
--   normalized     duration_s / baseline_s
CREATE OR REPLACE MACRO train_duration(runs := NULL) AS TABLE
WITH
logged AS (
    SELECT run, (max(ts_ns) - min(ts_ns)) / 1e9 AS duration_s, count(*) FILTER (WHERE type = 'Batch') AS steps
    FROM train_log
    GROUP BY run
),
d AS (
    SELECT m.run, m.framework, m.model, m.optimizer, m.batch_size, m.backend, m.topology, m.n_workers,
           m.loss_pct, l.steps, l.duration_s
    FROM run_meta AS m
    JOIN logged AS l ON l.run = m.run
),
baseline AS (
    SELECT x.run, avg(b.duration_s) AS baseline_s, count(b.run) AS baseline_runs
    FROM d AS x
    LEFT JOIN d AS b
        ON coalesce(b.loss_pct, 0) = 0
        AND b.framework IS NOT DISTINCT FROM x.framework
        AND b.model IS NOT DISTINCT FROM x.model
        AND b.optimizer IS NOT DISTINCT FROM x.optimizer
        AND b.batch_size IS NOT DISTINCT FROM x.batch_size
        AND b.backend IS NOT DISTINCT FROM x.backend
        AND b.topology IS NOT DISTINCT FROM x.topology
        AND b.n_workers IS NOT DISTINCT FROM x.n_workers
    GROUP BY x.run
)
SELECT d.*, baseline.baseline_s, baseline.baseline_runs, d.duration_s / baseline.baseline_s AS normalized
FROM d
JOIN baseline ON baseline.run = d.run
WHERE runs IS NULL OR list_contains(runs, d.run)
ORDER BY d.framework, d.model, d.batch_size, d.loss_pct, d.run;

CREATE OR REPLACE VIEW train_duration AS SELECT * FROM train_duration();
