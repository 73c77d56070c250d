-- Mean bytes per directed worker pair over a set of runs: the heatmap of Fig. 4.
-- Kind: answer
-- Key: src_worker, dst_worker
-- Headline: mean_bytes, n_runs
-- Partition: run
-- Combine: flow_matrix
--
-- Semantics: the notebook summed the per-run src×dst pivot tables (missing pairs filled with 0)
-- over the runs of one framework/topology and divided by (#runs · 1e9). Same here, by worker
-- label, so runs on different addresses line up; a pair a run never used counts as 0 for it.
-- Only worker-to-worker traffic is kept.
-- On a Dask cluster (`Combine: flow_matrix`) the workers compute `flow_matrix` per run and this SQL
-- runs on the driver over their rows: the sums are of integers, so the result is the local one.
--
-- Parameters:
--   runs     list of run names to average over; NULL = every run
--   from_ns  window start, ns after each run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after each run's first packet; NULL = run end
-- Columns:
--   src_worker, dst_worker   worker labels
--   n_runs                   runs in the set (the divisor)
--   mean_bytes               sum of bytes over the runs / n_runs, bytes
--   mean_gb                  mean_bytes / 1e9, GB
CREATE OR REPLACE MACRO flow_matrix_mean(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH fm AS (
    SELECT run, src_worker, dst_worker, bytes
    FROM flow_matrix(runs := runs, from_ns := from_ns, to_ns := to_ns)
),
n AS (SELECT count(DISTINCT run) AS n_runs FROM fm)
SELECT fm.src_worker, fm.dst_worker, any_value(n.n_runs) AS n_runs,
       sum(fm.bytes) / any_value(n.n_runs) AS mean_bytes,
       sum(fm.bytes) / any_value(n.n_runs) / 1e9 AS mean_gb
FROM fm, n
WHERE fm.src_worker IS NOT NULL AND fm.dst_worker IS NOT NULL
GROUP BY fm.src_worker, fm.dst_worker
ORDER BY fm.src_worker, fm.dst_worker;

CREATE OR REPLACE VIEW flow_matrix_mean AS SELECT * FROM flow_matrix_mean();
