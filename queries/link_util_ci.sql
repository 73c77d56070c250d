-- Mean Gbit/s of one link over consecutive windows, with a 95% confidence interval (Table II).
-- Kind: answer
-- Key: run, src_worker, dst_worker
-- Headline: mean_gbps, ci_low_gbps, ci_high_gbps, windows
-- Partition: run
--
-- Semantics: the notebook took the 10 ms link utilization of W1→W2, the means of 30 one-second
-- windows from 90 s on (rows 9000 + 100·i), and reported m ± 1.96·std/10 with np.var (ddof = 0).
-- Fixed here: m ± t(0.975, n−1)·s/√n with n the number of windows used (method := 'normal' gives
-- the paper's 1.96, 'bootstrap' resampled means), clipped at 0 Gbit/s, s the sample standard
-- deviation (ddof = 1); windows sit on the run's time axis (integer UTC ns), not on row numbers;
-- only complete windows count. The mean of a window's zero-filled 10 ms Gbit/s values equals the
-- window's bytes·8 / window_ns, which is what is computed.
-- The estimate is `link_ci`'s (by_pair := true), shared with `throughput_ci`.
-- The paper's Table II: from_ns := 90e9, to_ns := 120e9, src := 'W1', dst := 'W2'.
--
-- Parameters:
--   window_ns               window width, ns (default 1 000 000 000 = 1 s)
--   src, dst                the link as worker labels, e.g. 'W1', 'W2'; NULL = every link with traffic
--   runs                    list of run names; NULL = every run
--   from_ns                 first window start, ns after the run's first packet; NULL = run start
--   to_ns                   end of the last window (exclusive), ns after the run's first packet; NULL = run end
--   method                  the interval: 't' (Student's t), 'normal' (1.96, the paper's) or 'bootstrap' (default 't')
-- Columns:
--   run, src_worker, dst_worker
--   from_s, to_s                 the span used, seconds after the run's first packet
--   windows                      number of complete windows (n)
--   mean_gbps, std_gbps          mean and sample standard deviation of the window means, Gbit/s
--   ci_low_gbps, ci_high_gbps    the 95% interval by `method` (see link_ci), the lower bound at least 0, Gbit/s
--   ci_method                    the method used
CREATE OR REPLACE MACRO link_util_ci(window_ns := 1000000000, src := NULL, dst := NULL, runs := NULL, from_ns := NULL,
                                     to_ns := NULL, method := 't') AS TABLE
SELECT run, src_worker, dst_worker, from_s, to_s, windows, mean_gbps, std_gbps, ci_low_gbps, ci_high_gbps, ci_method
FROM link_ci(window_ns := window_ns, src := src, dst := dst, runs := runs, from_ns := from_ns, to_ns := to_ns,
             by_pair := true, method := method)
ORDER BY run, src_worker, dst_worker;

CREATE OR REPLACE VIEW link_util_ci AS SELECT * FROM link_util_ci();
