-- Mean throughput of a run over a window, with a 95% confidence interval (Table I).
-- Kind: answer
-- Key: run
-- Headline: mean_gbps, ci_low_gbps, ci_high_gbps, n
-- Partition: run
--
-- Semantics: the notebook took bytes_per_sec (all traffic per 1 ms) ×8/1e6, summed per second
-- /1000 to Gbit/s, took seconds [200:300] and reported m ± 1.96·std/10. Fixed here: the interval
-- is m ± t(0.975, n−1)·s/√n with n the number of seconds actually used (the notebook hard-coded
-- 10 = √100, wrong for any other window; method := 'normal' gives its 1.96 with the right n,
-- 'bootstrap' resampled means), clipped at 0 Gbit/s; s is the sample standard deviation (ddof = 1, pandas' .var());
-- the samples are the complete bins of the window, anchored at its start (the run's first packet
-- unless from_ns is given), so the cut-short last second of a run does not drag the mean down;
-- empty seconds count as 0 Gbit/s.
-- The estimate is `link_ci`'s with one series per run (by_pair := false), shared with `link_util_ci`.
-- The paper's Table I window: from_ns := 200e9, to_ns := 300e9.
--
-- Parameters:
--   bin_ns   sample width, ns (default 1 000 000 000 = one sample per second)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
--   method   the interval: 't' (Student's t), 'normal' (1.96, the paper's) or 'bootstrap' (default 't')
-- Columns:
--   run
--   from_s, to_s          the seconds used, after the run's first packet
--   n                     number of samples (complete bins)
--   mean_gbps, std_gbps   mean and sample standard deviation of the per-bin Gbit/s
--   ci_low_gbps, ci_high_gbps   the 95% interval by `method` (see link_ci), the lower bound at least 0, Gbit/s
--   ci_method             the method used
CREATE OR REPLACE MACRO throughput_ci(bin_ns := 1000000000, runs := NULL, from_ns := NULL, to_ns := NULL,
                                      method := 't') AS TABLE
SELECT run, from_s, to_s, windows AS n, mean_gbps, std_gbps, ci_low_gbps, ci_high_gbps, ci_method
FROM link_ci(window_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := false, method := method)
ORDER BY run;

CREATE OR REPLACE VIEW throughput_ci AS SELECT * FROM throughput_ci();
