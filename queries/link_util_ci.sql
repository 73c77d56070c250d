-- Mean Gbit/s of one link over consecutive windows, with a 95% confidence interval (Table II).
-- Kind: answer
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
CREATE OR REPLACE MACRO link_util_ci(window_ns := 1000000000, src := NULL, dst := NULL, runs := NULL, from_ns := NULL,
                                     to_ns := NULL) AS TABLE
WITH
w AS (  -- the span holds n complete windows, anchored at its start
    SELECT run, start_ns, lo_ns, (hi_ns - lo_ns) // window_ns::BIGINT AS n
    FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
),
binned AS (
    SELECT p.run, xor(xor(hash(p.src_ip), hash(p.dst_ip) >> 1), hash(p.run) >> 2) AS pair, (p.ts_ns - w.lo_ns) // window_ns::BIGINT AS k,
           sum(p.frame_len)::BIGINT AS bytes
    FROM packets AS p
    JOIN w ON w.run = p.run
    WHERE (runs IS NULL OR list_contains(runs, p.run))
        AND p.ts_ns >= w.lo_ns AND p.ts_ns < w.lo_ns + w.n * window_ns::BIGINT
    GROUP BY ALL
),
labelled AS (
    SELECT b.run, wp.src_worker, wp.dst_worker, b.k, b.bytes
    FROM binned AS b
    JOIN worker_pairs AS wp ON wp.run = b.run AND wp.pair = b.pair
    WHERE (src IS NULL OR wp.src_worker = src) AND (dst IS NULL OR wp.dst_worker = dst)
),
samples AS (
    SELECT pr.run, pr.src_worker, pr.dst_worker, coalesce(l.bytes, 0) * 8.0 / window_ns::BIGINT AS gbps
    FROM (SELECT DISTINCT run, src_worker, dst_worker FROM labelled) AS pr
    JOIN w ON w.run = pr.run
    CROSS JOIN range(0, w.n) AS g(k)
    LEFT JOIN labelled AS l
        ON l.run = pr.run AND l.src_worker = pr.src_worker AND l.dst_worker = pr.dst_worker AND l.k = g.k
),
stats AS (
    SELECT run, src_worker, dst_worker, count(*) AS windows, avg(gbps) AS mean_gbps, stddev_samp(gbps) AS std_gbps
    FROM samples
    GROUP BY run, src_worker, dst_worker
)
SELECT
    s.run,
    s.src_worker,
    s.dst_worker,
    (w.lo_ns - w.start_ns) / 1e9 AS from_s,
    (w.lo_ns - w.start_ns + w.n * window_ns::BIGINT) / 1e9 AS to_s,
    s.windows,
    s.mean_gbps,
    s.std_gbps,
    s.mean_gbps - 1.96 * s.std_gbps / sqrt(s.windows) AS ci_low_gbps,
    s.mean_gbps + 1.96 * s.std_gbps / sqrt(s.windows) AS ci_high_gbps
FROM stats AS s
JOIN w ON w.run = s.run
ORDER BY s.run, s.src_worker, s.dst_worker;

CREATE OR REPLACE VIEW link_util_ci AS SELECT * FROM link_util_ci();
