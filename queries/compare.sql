-- Two runs, or two groups of runs, side by side: per-step bytes, durations, link load and flows, with the differences.
-- Kind: answer
-- Key: a, b, metric, src_worker, dst_worker
-- Headline: value_a, value_b, diff, rel_diff
-- Needs: two runs
-- Partition: none
--
-- Sides: without `group_by`, side a is the first run of `runs` (in the order given; the first by name
-- when runs is NULL) and every other selected run is a side b of its own. With `group_by` (a column of
-- `run_meta`, e.g. 'loss_pct' or 'batch_size'), the selected runs are grouped by that column's
-- value; side a is the group of the lowest value (numbers compared as numbers) and every other
-- value's group a side b. A side's value is the mean over its runs that have the metric.
-- So "what did 1 % loss do" is `--run A --run B` or `-p group_by=loss_pct`.
-- Not split by run on a Dask cluster (`Partition: none`): it needs both sides at once.
--
-- Metrics (src_worker, dst_worker NULL for the run-level ones; the training window is the one of
-- `train_window`, (first, last logged step]; the link metrics use `link_steady`'s steady bins):
--   steps               whole steps in the training window (`data_per_step`)
--   train_s             steps × mean step duration, seconds
--   step_s              mean step duration, seconds
--   bytes_per_step      frame bytes of the run's packets in the training window per step, bytes
--   payload_per_step    transport payload of them per step, bytes
--   flows_4tuple, flows_5tuple, flows_connection, flows_hostpair, flows_qp   `flow_counts` over the
--                       whole run
--   pair_bytes_per_step     per directed worker pair: frame bytes per step in the training window
--                           (`topology_check`), bytes
--   pair_payload_per_step   per directed worker pair: payload bytes per step, bytes
--   mean_gbps           per directed worker pair: mean Gbit/s over its steady bins (idle ones included)
--   peak_gbps           per directed worker pair: largest steady bin's Gbit/s
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   group_by a column of run_meta to group the runs by; NULL = compare runs (default)
--   bin_ns   bin width of mean_gbps and peak_gbps, ns (default 10 000 000 = 10 ms)
-- Columns:
--   a, b                  the two sides: a run name, or `group_by`=value
--   a_runs, b_runs        runs on each side
--   metric                one of the metrics above
--   src_worker, dst_worker   directed worker pair of a per-pair metric; NULL for a run-level one
--   value_a, value_b      the metric on each side (mean over the side's runs), in the metric's unit
--   diff                  value_b − value_a
--   rel_diff              diff / value_a; NULL when value_a is 0 or NULL
CREATE OR REPLACE MACRO compare(runs := NULL, group_by := NULL, bin_ns := 10000000) AS TABLE
WITH
picked AS (
    SELECT m.run,
           CASE WHEN group_by IS NULL THEN m.run ELSE group_by || '=' || coalesce(to_json(m) ->> group_by, 'NULL') END AS side,
           CASE WHEN group_by IS NULL THEN NULL ELSE to_json(m) ->> group_by END AS value,
           CASE WHEN group_by IS NULL OR list_contains(json_keys(to_json(m)), group_by) THEN NULL
                ELSE error('compare: run_meta has no column ' || group_by || '; group_by takes one of '
                           || array_to_string(json_keys(to_json(m)), ', '))
           END AS bad,
           coalesce(list_position(runs, m.run), 0) AS given
    FROM run_meta AS m
    WHERE runs IS NULL OR list_contains(runs, m.run)
),
sides AS (  -- rank 1 = side a
    SELECT side, count(*) AS n_runs,
           dense_rank() OVER (ORDER BY CASE WHEN group_by IS NULL THEN min(given) END, try_cast(any_value(value) AS DOUBLE) NULLS LAST,
                              any_value(value), side) AS rank
    FROM picked
    GROUP BY side
),
per_run AS (  -- (run, metric, src_worker, dst_worker, value)
    SELECT run, unnest(['steps', 'train_s', 'step_s', 'bytes_per_step', 'payload_per_step']) AS metric,
           NULL::VARCHAR AS src_worker, NULL::VARCHAR AS dst_worker,
           unnest([steps, steps * step_s, step_s, bytes / steps, payload_bytes / steps]) AS value
    FROM data_per_step(runs := runs)
    UNION ALL
    SELECT run, 'flows_' || definition, NULL, NULL, flows FROM flow_counts(runs := runs)
    UNION ALL
    SELECT run, unnest(['pair_bytes_per_step', 'pair_payload_per_step']), src_worker, dst_worker,
           unnest([bytes / steps, payload_bytes / steps])
    FROM topology_check(runs := runs)
    UNION ALL
    SELECT run, unnest(['mean_gbps', 'peak_gbps']), src_worker, dst_worker,
           unnest([sum(bytes) * 8.0 / (count(*) * any_value(bin_ns)), max(gbps)])  -- exact sums: same bits in any order
    FROM link_steady(bin_ns := bin_ns, runs := runs)
    WHERE steady
    GROUP BY run, src_worker, dst_worker
),
per_side AS (
    SELECT p.side, r.metric, r.src_worker, r.dst_worker, list_avg(list(r.value ORDER BY r.run)) AS value
    FROM per_run AS r
    JOIN picked AS p USING (run)
    WHERE r.value IS NOT NULL
    GROUP BY p.side, r.metric, r.src_worker, r.dst_worker
),
a AS (
    SELECT v.* FROM per_side AS v JOIN sides AS s USING (side) WHERE s.rank = 1
),
b AS (
    SELECT v.*, s.rank FROM per_side AS v JOIN sides AS s USING (side) WHERE s.rank > 1
),
pairs AS (  -- every side b against side a, metric by metric
    SELECT bs.side AS b, bs.rank, k.metric, k.src_worker, k.dst_worker
    FROM sides AS bs
    CROSS JOIN (SELECT DISTINCT metric, src_worker, dst_worker FROM per_side) AS k
    WHERE bs.rank > 1
)
SELECT
    sa.side AS a,
    k.b,
    sa.n_runs AS a_runs,
    sb.n_runs AS b_runs,
    k.metric,
    k.src_worker,
    k.dst_worker,
    a.value AS value_a,
    b.value AS value_b,
    b.value - a.value AS diff,
    (b.value - a.value) / nullif(a.value, 0) AS rel_diff
FROM pairs AS k
JOIN sides AS sa ON sa.rank = 1
JOIN sides AS sb ON sb.side = k.b
LEFT JOIN a ON a.metric = k.metric AND a.src_worker IS NOT DISTINCT FROM k.src_worker
    AND a.dst_worker IS NOT DISTINCT FROM k.dst_worker
LEFT JOIN b ON b.side = k.b AND b.metric = k.metric AND b.src_worker IS NOT DISTINCT FROM k.src_worker
    AND b.dst_worker IS NOT DISTINCT FROM k.dst_worker
WHERE (SELECT count(bad) FROM picked) = 0
ORDER BY k.rank,
         list_position(['steps', 'train_s', 'step_s', 'bytes_per_step', 'payload_per_step', 'flows_4tuple',
                        'flows_5tuple', 'flows_connection', 'flows_hostpair', 'flows_qp', 'pair_bytes_per_step',
                        'pair_payload_per_step', 'mean_gbps', 'peak_gbps'], k.metric),
         k.src_worker NULLS FIRST, k.dst_worker;

CREATE OR REPLACE VIEW compare AS SELECT * FROM compare();
