-- Mean Gbit/s over consecutive complete windows with a 95% confidence interval, per directed worker pair or per run.
-- Kind: building block
-- Partition: run
--
-- Why: `link_util_ci` (one link, Table II) and `throughput_ci` (all traffic of a run, Table I) are
-- the same estimate over two kinds of series, so the windows, the zero-filled samples and the
-- interval are written once, here. The span from the window's start holds n complete windows (the
-- cut-short last one does not count); each window's sample is its bytes·8 / window_ns, empty
-- windows count as 0 Gbit/s; s is the sample standard deviation (ddof = 1). Both come from exact
-- integer sums over the windows (n, Σbytes, Σbytes²), not from float aggregates whose last bit
-- depends on the order DuckDB's threads feed them: the result is the same bits for any split of
-- the runs (`Partition: run`; see tracecore/partition.py).
-- The interval (method):
--   't' (default)   m ± t(0.975, n−1)·s/√n, Student's t: right for the few windows a run has
--                   (n = 30 gives 2.045, not 1.96); exact quantiles for n−1 ≤ 30, a five-term
--                   Cornish-Fisher expansion beyond (relative error < 4e-10)
--   'normal'        m ± 1.96·s/√n, the paper's interval (with n, where the notebook used a fixed 10)
--   'bootstrap'     the 2.5 % and 97.5 % quantiles of 1 000 resampled means (n windows drawn with
--                   replacement; the draws come from a fixed integer mixer, so the interval is the
--                   same on every run and split, and every series gets the same draws)
-- Throughput cannot be negative: a lower bound below 0 Gbit/s is clipped to 0.
-- by_pair := true: one series per directed worker pair with traffic in the span (src, dst pick
-- links); by_pair := false: one series per run holding every packet (src_worker, dst_worker NULL).
--
-- Parameters:
--   window_ns   window width, ns (default 1 000 000 000 = 1 s); range (0, ∞)
--   src, dst    with by_pair: the link as worker labels, e.g. 'W1', 'W2'; NULL = every link with traffic
--   runs        list of run names; NULL = every run
--   from_ns     first window start, ns after the run's first packet; NULL = run start
--   to_ns       end of the last window (exclusive), ns after the run's first packet; NULL = run end
--   by_pair     true = a series per directed worker pair, false = a series per run (default true)
--   method      the interval: 't', 'normal' or 'bootstrap' (default 't')
-- Columns:
--   run, src_worker, dst_worker   the series: a directed pair (worker labels), or NULL, NULL
--   from_s, to_s                  the span used, seconds after the run's first packet
--   windows                       number of complete windows (n)
--   mean_gbps, std_gbps           mean and sample standard deviation of the window samples, Gbit/s
--   ci_low_gbps, ci_high_gbps     the 95% interval by `method`, the lower bound at least 0, Gbit/s
--   ci_method                     the method: 't', 'normal' or 'bootstrap'
CREATE OR REPLACE MACRO link_ci(window_ns := 1000000000, src := NULL, dst := NULL, runs := NULL, from_ns := NULL,
                                to_ns := NULL, by_pair := true, method := 't') AS TABLE
WITH
sized AS (  -- the samples' number, estimated from the small tables: grid_check stops one too large
    SELECT grid_check(rows, window_ns) AS zero
    FROM grid_rows(bin_ns := window_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := by_pair)
),
checked AS (  -- an unknown method is an error, not a silent default
    SELECT CASE WHEN method IN ('t', 'normal', 'bootstrap') THEN method
                ELSE error('method must be t, normal or bootstrap, not ' || method) END AS method
),
w AS (  -- the span holds n complete windows, anchored at its start (`+ s.zero`: sized before
        -- the packets are read, which join w)
    SELECT run, start_ns, lo_ns + s.zero AS lo_ns, (hi_ns - lo_ns) // window_ns::BIGINT AS n
    FROM sized AS s, run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
),
binned AS (
    SELECT p.run,
           CASE WHEN by_pair THEN xor(xor(hash(p.src_ip), hash(p.dst_ip) >> 1), hash(p.run) >> 2) ELSE 0::UBIGINT END
               AS series,
           (p.ts_ns - w.lo_ns) // window_ns::BIGINT AS k, sum(p.frame_len)::BIGINT AS bytes
    FROM packets AS p
    JOIN w ON w.run = p.run
    WHERE (runs IS NULL OR list_contains(runs, p.run))
        AND p.ts_ns >= w.lo_ns AND p.ts_ns < w.lo_ns + w.n * window_ns::BIGINT
    GROUP BY ALL
),
labelled AS (  -- the series: worker pairs with traffic, labelled and picked by src/dst, or each run whole
    SELECT DISTINCT b.run, b.series, wp.src_worker, wp.dst_worker
    FROM binned AS b
    JOIN worker_pairs AS wp ON wp.run = b.run AND wp.pair = b.series
    WHERE by_pair AND (src IS NULL OR wp.src_worker = src) AND (dst IS NULL OR wp.dst_worker = dst)
    UNION ALL
    SELECT run, 0::UBIGINT AS series, NULL AS src_worker, NULL AS dst_worker
    FROM w
    WHERE NOT by_pair
),
samples AS (
    SELECT l.run, l.series, l.src_worker, l.dst_worker, g.k, coalesce(b.bytes, 0)::HUGEINT AS bytes
    FROM labelled AS l
    JOIN w ON w.run = l.run
    CROSS JOIN range(0, w.n) AS g(k)
    LEFT JOIN binned AS b ON b.run = l.run AND b.series = l.series AND b.k = g.k
),
sums AS (  -- exact integer sums: the same bits whatever order the samples arrive in
    SELECT run, series, any_value(src_worker) AS src_worker, any_value(dst_worker) AS dst_worker, count(*) AS windows,
           sum(bytes) AS s1, sum(bytes * bytes) AS s2
    FROM samples
    GROUP BY run, series
),
draws AS (  -- bootstrap only: replicate r draws window k for its i-th sample (splitmix-style mixing)
    SELECT run, r, (xor(x2, x2 >> 32) % n)::BIGINT AS k
    FROM (
        SELECT run, n, r, ((xor(x1, x1 >> 29)::HUGEINT * 2685821657736338717) % 18446744073709551616)::UBIGINT AS x2
        FROM (
            SELECT w.run, w.n, rr.r,
                   (((rr.r * 1000003 + i.i + 1)::HUGEINT * 11400714819323198485) % 18446744073709551616)::UBIGINT AS x1
            FROM w
            CROSS JOIN range(0, CASE WHEN (SELECT method FROM checked) = 'bootstrap' THEN 1000 ELSE 0 END) AS rr(r)
            CROSS JOIN range(0, w.n) AS i(i)
        )
    )
),
replicates AS (  -- each replicate's mean from its exact byte sum
    SELECT s.run, s.series, d.r, sum(s.bytes)::DOUBLE * 8 / (any_value(w.n) * window_ns::BIGINT) AS mean_gbps
    FROM draws AS d
    JOIN samples AS s ON s.run = d.run AND s.k = d.k
    JOIN w ON w.run = d.run
    GROUP BY s.run, s.series, d.r
),
bootstrap AS (
    SELECT run, series, quantile_disc(mean_gbps, 0.025) AS lo, quantile_disc(mean_gbps, 0.975) AS hi
    FROM replicates
    GROUP BY run, series
),
stats AS (
    SELECT run, series, src_worker, dst_worker, windows,
           s1::DOUBLE * 8 / (windows * window_ns::BIGINT) AS mean_gbps,
           CASE WHEN windows > 1
                THEN sqrt((windows * s2 - s1 * s1)::DOUBLE / (windows * (windows - 1))) * 8 / window_ns::BIGINT
           END AS std_gbps
    FROM sums
),
quantile AS (  -- the factor that multiplies s/√n; t: exact for n−1 ≤ 30, Cornish-Fisher in v = n−1 beyond
    SELECT run, series,
           CASE (SELECT method FROM checked)
               WHEN 'normal' THEN 1.96
               WHEN 't' THEN CASE WHEN v <= 30 THEN [
                                       12.706204736175, 4.302652729749, 3.182446305284, 2.776445105198, 2.570581835636,
                                       2.446911851145, 2.364624251593, 2.306004135204, 2.262157162798, 2.228138851986,
                                       2.200985160092, 2.178812829667, 2.160368656463, 2.144786687918, 2.131449545560,
                                       2.119905299221, 2.109815577833, 2.100922040241, 2.093024054408, 2.085963447266,
                                       2.079613844728, 2.073873067904, 2.068657610419, 2.063898561628, 2.059538552753,
                                       2.055529438643, 2.051830516480, 2.048407141795, 2.045229642133, 2.042272456301
                                      ][v::BIGINT]
                                  ELSE 1.959963984540 + 2.372271230299 / v + 2.822498615740 / (v * v)
                                       + 2.555849679508 / (v * v * v) + 1.589534053394 / (v * v * v * v)
                                       + 0.732898211982 / (v * v * v * v * v) END
           END AS q
    FROM (SELECT run, series, (windows - 1)::DOUBLE AS v FROM stats WHERE windows > 1)
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
    CASE WHEN s.windows > 1 THEN greatest(0.0, coalesce(bs.lo, s.mean_gbps - q.q * s.std_gbps / sqrt(s.windows)))
    END AS ci_low_gbps,
    coalesce(bs.hi, s.mean_gbps + q.q * s.std_gbps / sqrt(s.windows)) AS ci_high_gbps,
    (SELECT method FROM checked) AS ci_method
FROM stats AS s
JOIN w ON w.run = s.run
LEFT JOIN quantile AS q ON q.run = s.run AND q.series = s.series
LEFT JOIN bootstrap AS bs ON bs.run = s.run AND bs.series = s.series;

CREATE OR REPLACE VIEW link_ci AS SELECT * FROM link_ci();
