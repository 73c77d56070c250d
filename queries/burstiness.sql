-- Peak-to-mean ratio of each link's load at several bin widths: microbursts hide in 10 ms bins.
-- Kind: answer
-- Key: run, src_worker, dst_worker, bin_ns
-- Headline: mean_gbps, peak_gbps, peak_to_mean
-- Partition: run
--
-- Why: the paper plots 10 ms means; a link that is idle 90% of the time and saturated the rest
-- shows a flat 10% there. The same bytes binned at 100 µs, 1 ms, 10 ms and 100 ms show how the
-- peak rate falls as bins widen while the mean stays put. Bins are multiples of the width since
-- the Unix epoch (as in `link_util`), from the one holding the run's first packet (or the window's
-- start) to the one holding its last packet (or the window's end − 1), and zero-filled: the mean divides by every bin, empty or not. One pass
-- over the packets: bytes are binned at the greatest common divisor of the widths and rolled up.
-- Speed: that pass groups on two integers, the pair key of `worker_pairs` (run included) and the fine
-- bin, and labels the few result rows afterwards; the finest width, when it is that divisor, is the
-- fine bins themselves, and the run's first and last bins come from the same pass (`run_bounds`, a
-- second pass over ts_ns, only runs when a window is asked for).
--
-- Parameters:
--   bins_ns  list of bin widths, ns (default [100000, 1000000, 10000000, 100000000]); range (0, ∞)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run, src_worker, dst_worker   directed worker pair with ≥ 1 packet in the window
--   bin_ns                        bin width, ns
--   bins                          bins in the window (zero-filled count)
--   busy_bins                     bins with at least one packet
--   mean_gbps                     bytes·8 / (bins · bin_ns), Gbit/s
--   peak_gbps                     largest bin's bytes·8 / bin_ns, Gbit/s
--   peak_to_mean                  peak_gbps / mean_gbps
CREATE OR REPLACE MACRO burstiness(bins_ns := [100000, 1000000, 10000000, 100000000], runs := NULL, from_ns := NULL,
                                   to_ns := NULL) AS TABLE
WITH
base AS (SELECT list_reduce(list_transform(bins_ns, lambda x: x::BIGINT), lambda a, b: gcd(a, b)) AS g),
widths AS (  -- each width once, with how often it was asked for (a repeated width counts its bytes that often)
    SELECT width, count(*) AS times FROM (SELECT unnest(bins_ns)::BIGINT AS width) GROUP BY width
),
fine AS (  -- integer keys only: the run's address pair as one hash (see worker_pairs) and the fine bin
    SELECT xor(xor(hash(p.src_ip), hash(p.dst_ip) >> 1), hash(p.run) >> 2) AS pair, p.ts_ns // base.g AS k,
           sum(p.frame_len)::BIGINT AS bytes, any_value(hash(p.run)) AS run_key
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns) AS p
    CROSS JOIN base
    GROUP BY pair, k
),
per_bin AS (  -- bytes per bin of each width: the fine bins as they are, wider bins as sums of them
    SELECT f.pair, w.width, f.bytes * w.times AS bytes
    FROM fine AS f
    CROSS JOIN base
    JOIN widths AS w ON w.width = base.g
    UNION ALL
    SELECT f.pair, w.width, sum(f.bytes)::BIGINT * any_value(w.times) AS bytes
    FROM fine AS f
    CROSS JOIN base
    JOIN widths AS w ON w.width > base.g
    GROUP BY f.pair, w.width, (f.k * base.g) // w.width
),
stats AS (
    SELECT pair, width, count(*) AS busy_bins, sum(bytes)::HUGEINT AS total, max(bytes)::HUGEINT AS peak
    FROM per_bin
    GROUP BY pair, width
),
span AS (  -- with no window: the fine bins of the run's first and last packet, every pair's (workers or not)
    SELECT run_key, min(k) AS k_lo, max(k) AS k_hi FROM fine GROUP BY run_key
),
win AS (  -- only planned when a window is asked for (constant-false filter otherwise)
    SELECT run, lo_ns, hi_ns
    FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE from_ns IS NOT NULL OR to_ns IS NOT NULL
),
counted AS (
    SELECT wp.run, wp.src_worker, wp.dst_worker, s.width, s.busy_bins, s.total, s.peak,
           coalesce((w.hi_ns - 1) // s.width - w.lo_ns // s.width,
                    sp.k_hi // (s.width // base.g) - sp.k_lo // (s.width // base.g)) + 1 AS bins
    FROM stats AS s
    CROSS JOIN base
    JOIN worker_pairs AS wp ON wp.pair = s.pair
    JOIN span AS sp ON sp.run_key = hash(wp.run)
    LEFT JOIN win AS w ON w.run = wp.run
)
SELECT run, src_worker, dst_worker, width AS bin_ns, bins, busy_bins,
       total * 8.0 / (bins * width) AS mean_gbps,
       peak * 8.0 / width AS peak_gbps,
       peak * bins / total AS peak_to_mean
FROM counted
ORDER BY run, src_worker, dst_worker, bin_ns;

CREATE OR REPLACE VIEW burstiness AS SELECT * FROM burstiness();
