-- The training window of each run: first and last logged Batch step, and the steps between them.
-- Kind: building block
-- Partition: run
--
-- Shared by the per-step views (`data_per_step`, `topology_check`): traffic counted "per step" is
-- the traffic sent after the first logged step and up to the last one, divided by the steps between
-- them. Runs with fewer than two logged steps have no window.
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns:
--   run
--   t_first   UTC ns of the first logged Batch step
--   t_last    UTC ns of the last logged Batch step
--   steps     logged Batch rows − 1: the steps completed between t_first and t_last
CREATE OR REPLACE MACRO train_window(runs := NULL) AS TABLE
SELECT run, min(ts_ns) AS t_first, max(ts_ns) AS t_last, count(*) - 1 AS steps
FROM train_log
WHERE type = 'Batch' AND (runs IS NULL OR list_contains(runs, run))
GROUP BY run
HAVING count(*) >= 2;

CREATE OR REPLACE VIEW train_window AS SELECT * FROM train_window();
