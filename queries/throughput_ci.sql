-- Mean throughput of a run over a window, with a 95% confidence interval (Table I).
-- Kind: answer
--
-- Semantics: the notebook took bytes_per_sec (all traffic per 1 ms) ×8/1e6, summed per second
-- /1000 to Gbit/s, took seconds [200:300] and reported m ± 1.96·std/10. Fixed here: the interval
-- is m ± 1.96·s/√n with n the number of seconds actually used (the notebook hard-coded 10 = √100,
-- wrong for any other window); s is the sample standard deviation (ddof = 1, pandas' .var());
-- the samples are the complete bins of the window, anchored at its start (the run's first packet
-- unless from_ns is given), so the cut-short last second of a run does not drag the mean down;
-- empty seconds count as 0 Gbit/s.
-- The paper's Table I window: from_ns := 200e9, to_ns := 300e9.
--
-- Parameters:
--   bin_ns   sample width, ns (default 1 000 000 000 = one sample per second)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   from_s, to_s          the seconds used, after the run's first packet
--   n                     number of samples (complete bins)
--   mean_gbps, std_gbps   mean and sample standard deviation of the per-bin Gbit/s
--   ci_low_gbps, ci_high_gbps   mean ∓ 1.96·std/√n, Gbit/s
CREATE OR REPLACE MACRO throughput_ci(bin_ns := 1000000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
w AS (  -- the window holds n complete bins, anchored at its start
    SELECT run, start_ns, lo_ns, (hi_ns - lo_ns) // bin_ns::BIGINT AS n
    FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
),
binned AS (
    SELECT p.run, (p.ts_ns - w.lo_ns) // bin_ns::BIGINT AS k, sum(p.frame_len)::BIGINT AS bytes
    FROM packets AS p
    JOIN w ON w.run = p.run
    WHERE (runs IS NULL OR list_contains(runs, p.run))
        AND p.ts_ns >= w.lo_ns AND p.ts_ns < w.lo_ns + w.n * bin_ns::BIGINT
    GROUP BY p.run, k
),
samples AS (
    SELECT w.run, coalesce(b.bytes, 0) * 8.0 / bin_ns::BIGINT AS gbps
    FROM w
    CROSS JOIN range(0, w.n) AS g(k)
    LEFT JOIN binned AS b ON b.run = w.run AND b.k = g.k
),
stats AS (
    SELECT run, count(*) AS n, avg(gbps) AS mean_gbps, stddev_samp(gbps) AS std_gbps
    FROM samples
    GROUP BY run
)
SELECT
    w.run,
    (w.lo_ns - w.start_ns) / 1e9 AS from_s,
    (w.lo_ns - w.start_ns + w.n * bin_ns::BIGINT) / 1e9 AS to_s,
    s.n,
    s.mean_gbps,
    s.std_gbps,
    s.mean_gbps - 1.96 * s.std_gbps / sqrt(s.n) AS ci_low_gbps,
    s.mean_gbps + 1.96 * s.std_gbps / sqrt(s.n) AS ci_high_gbps
FROM w
JOIN stats AS s ON s.run = w.run
ORDER BY w.run;

CREATE OR REPLACE VIEW throughput_ci AS SELECT * FROM throughput_ci();
