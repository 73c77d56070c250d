-- Mean Gbit/s over consecutive complete windows with a 95% confidence interval, per directed worker pair or per run.
-- Kind: building block
-- Partition: run
--
-- Why: `link_util_ci` (one link, Table II) and `throughput_ci` (all traffic of a run, Table I) are
-- the same estimate over two kinds of series, so the windows, the zero-filled samples and the
-- interval m ± 1.96·s/√n are written once, here. The span from the window's start holds n complete
-- windows (the cut-short last one does not count); each window's sample is its bytes·8 / window_ns,
-- empty windows count as 0 Gbit/s; s is the sample standard deviation (ddof = 1). Both come from
-- exact integer sums over the windows (n, Σbytes, Σbytes²), not from float aggregates whose last
-- bit depends on the order DuckDB's threads feed them: the result is the same bits for any split
-- of the runs (`Partition: run`; see tracecore/partition.py).
-- by_pair := true: one series per directed worker pair with traffic in the span (src, dst pick
-- links); by_pair := false: one series per run holding every packet (src_worker, dst_worker NULL).
--
-- Parameters:
--   window_ns   window width, ns (default 1 000 000 000 = 1 s)
--   src, dst    with by_pair: the link as worker labels, e.g. 'W1', 'W2'; NULL = every link with traffic
--   runs        list of run names; NULL = every run
--   from_ns     first window start, ns after the run's first packet; NULL = run start
--   to_ns       end of the last window (exclusive), ns after the run's first packet; NULL = run end
--   by_pair     true = a series per directed worker pair, false = a series per run (default true)
-- Columns:
--   run, src_worker, dst_worker   the series: a directed pair (worker labels), or NULL, NULL
--   from_s, to_s                  the span used, seconds after the run's first packet
--   windows                       number of complete windows (n)
--   mean_gbps, std_gbps           mean and sample standard deviation of the window samples, Gbit/s
--   ci_low_gbps, ci_high_gbps     mean ∓ 1.96·std/√n, Gbit/s
CREATE OR REPLACE MACRO link_ci(window_ns := 1000000000, src := NULL, dst := NULL, runs := NULL, from_ns := NULL,
                                to_ns := NULL, by_pair := true) AS TABLE
WITH
checked AS (  -- the samples' number, estimated from the small tables: grid_check stops one too large
    SELECT grid_check(rows, window_ns) AS zero
    FROM grid_rows(bin_ns := window_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := by_pair)
),
w AS (  -- the span holds n complete windows, anchored at its start (`+ c.zero`: checked before
        -- the packets are read, which join w)
    SELECT run, start_ns, lo_ns, (hi_ns - lo_ns) // window_ns::BIGINT + c.zero AS n
    FROM checked AS c, run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
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
    SELECT l.run, l.series, l.src_worker, l.dst_worker, coalesce(b.bytes, 0)::HUGEINT AS bytes
    FROM labelled AS l
    JOIN w ON w.run = l.run
    CROSS JOIN range(0, w.n) AS g(k)
    LEFT JOIN binned AS b ON b.run = l.run AND b.series = l.series AND b.k = g.k
),
sums AS (  -- exact integer sums: the same bits whatever order the samples arrive in
    SELECT run, any_value(src_worker) AS src_worker, any_value(dst_worker) AS dst_worker, count(*) AS windows,
           sum(bytes) AS s1, sum(bytes * bytes) AS s2
    FROM samples
    GROUP BY run, series
),
stats AS (
    SELECT run, src_worker, dst_worker, windows,
           s1::DOUBLE * 8 / (windows * window_ns::BIGINT) AS mean_gbps,
           CASE WHEN windows > 1
                THEN sqrt((windows * s2 - s1 * s1)::DOUBLE / (windows * (windows - 1))) * 8 / window_ns::BIGINT
           END AS std_gbps
    FROM sums
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
JOIN w ON w.run = s.run;

CREATE OR REPLACE VIEW link_ci AS SELECT * FROM link_ci();
