-- Mean Gbit/s of one link over consecutive windows, with a 95% confidence interval (Table II).
--
-- Semantics: the notebook took the 10 ms link utilization of W1→W2, the means of 30 one-second
-- windows from 90 s on (rows 9000 + 100·i), and reported m ± 1.96·std/10 with np.var (ddof = 0).
-- Fixed here: m ± 1.96·s/√n with n the number of windows used, s the sample standard deviation
-- (ddof = 1); windows sit on the run's time axis (integer UTC ns), not on row numbers; only
-- complete windows count. The mean of a window's zero-filled 10 ms Gbit/s values equals the
-- window's bytes·8 / window_ns, which is what is computed.
-- The paper's Table II: from_ns := 90e9, to_ns := 120e9, src := 'W1', dst := 'W2'.
--
-- Parameters:
--   window_ns               window width, ns (default 1 000 000 000 = 1 s)
--   src, dst                the link as worker labels, e.g. 'W1', 'W2'; NULL = every link with traffic
--   runs                    list of run names; NULL = every run
--   from_ns                 first window start, ns after the run's first packet; NULL = run start
--   to_ns                   end of the last window (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run, src_worker, dst_worker
--   from_s, to_s                 the span used, seconds after the run's first packet
--   windows                      number of complete windows (n)
--   mean_gbps, std_gbps          mean and sample standard deviation of the window means, Gbit/s
--   ci_low_gbps, ci_high_gbps    mean ∓ 1.96·std/√n, Gbit/s
CREATE OR REPLACE MACRO link_util_ci(window_ns := 1000000000, src := NULL, dst := NULL, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH samples AS (
    SELECT u.run, u.src_worker, u.dst_worker, u.t_s, u.bin_ns, u.gbps
    FROM link_util(bin_ns := window_ns, runs := runs, from_ns := from_ns, to_ns := to_ns) AS u
    JOIN run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns) AS w ON w.run = u.run
    WHERE u.bin_start_ns + u.bin_ns <= w.hi_ns
        AND (src IS NULL OR u.src_worker = src)
        AND (dst IS NULL OR u.dst_worker = dst)
),
stats AS (
    SELECT run, src_worker, dst_worker, min(t_s) AS from_s, max(t_s) + any_value(bin_ns) / 1e9 AS to_s,
           count(*) AS windows, avg(gbps) AS mean_gbps, stddev_samp(gbps) AS std_gbps
    FROM samples
    GROUP BY run, src_worker, dst_worker
)
SELECT run, src_worker, dst_worker, from_s, to_s, windows, mean_gbps, std_gbps,
       mean_gbps - 1.96 * std_gbps / sqrt(windows) AS ci_low_gbps,
       mean_gbps + 1.96 * std_gbps / sqrt(windows) AS ci_high_gbps
FROM stats
ORDER BY run, src_worker, dst_worker;

CREATE OR REPLACE VIEW link_util_ci AS SELECT * FROM link_util_ci();
