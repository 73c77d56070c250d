-- Mean throughput of a run over a window, with a 95% confidence interval (Table I).
--
-- Semantics: the notebook took bytes_per_sec (all traffic per 1 ms) ×8/1e6, summed per second
-- /1000 to Gbit/s, took seconds [200:300] and reported m ± 1.96·std/10. Fixed here: the interval
-- is m ± 1.96·s/√n with n the number of seconds actually used (the notebook hard-coded 10 = √100,
-- wrong for any other window); s is the sample standard deviation (ddof = 1, pandas' .var());
-- only complete bins inside the window count, so the cut-short last second of a run does not
-- drag the mean down; empty seconds count as 0 Gbit/s.
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
WITH samples AS (
    SELECT t.run, t.t_s, t.bin_ns, t.gbps
    FROM link_total(bin_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns) AS t
    JOIN run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns) AS w ON w.run = t.run
    WHERE t.bin_start_ns + t.bin_ns <= w.hi_ns
),
stats AS (
    SELECT run, min(t_s) AS from_s, max(t_s) + any_value(bin_ns) / 1e9 AS to_s, count(*) AS n,
           avg(gbps) AS mean_gbps, stddev_samp(gbps) AS std_gbps
    FROM samples
    GROUP BY run
)
SELECT run, from_s, to_s, n, mean_gbps, std_gbps,
       mean_gbps - 1.96 * std_gbps / sqrt(n) AS ci_low_gbps,
       mean_gbps + 1.96 * std_gbps / sqrt(n) AS ci_high_gbps
FROM stats
ORDER BY run;

CREATE OR REPLACE VIEW throughput_ci AS SELECT * FROM throughput_ci();
