-- Peak-to-mean ratio of each link's load at several bin widths: microbursts hide in 10 ms bins.
-- Kind: answer
-- Partition: run
--
-- Why: the paper plots 10 ms means; a link that is idle 90% of the time and saturated the rest
-- shows a flat 10% there. The same bytes binned at 100 µs, 1 ms, 10 ms and 100 ms show how the
-- peak rate falls as bins widen while the mean stays put. Bins are multiples of the width since
-- the Unix epoch (as in `link_util`), from the one holding the run's first packet (or the window's
-- start) to the one holding its last packet (or the window's end − 1), and zero-filled: the mean divides by every bin, empty or not. One pass
-- over the packets: bytes are binned at the greatest common divisor of the widths and rolled up.
--
-- Parameters:
--   bins_ns  list of bin widths, ns (default [100000, 1000000, 10000000, 100000000])
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
widths AS (SELECT unnest(bins_ns)::BIGINT AS width),
base AS (SELECT list_reduce(list_transform(bins_ns, lambda x: x::BIGINT), lambda a, b: gcd(a, b)) AS g),
fine AS (
    SELECT p.run, xor(xor(hash(p.src_ip), hash(p.dst_ip) >> 1), hash(p.run) >> 2) AS pair, p.ts_ns // base.g AS k,
           sum(p.frame_len)::BIGINT AS bytes
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns) AS p
    CROSS JOIN base
    GROUP BY ALL
),
win AS (SELECT run, lo_ns, hi_ns FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)),
labelled AS (
    SELECT f.run, wp.src_worker, wp.dst_worker, f.k, f.bytes
    FROM fine AS f
    JOIN worker_pairs AS wp ON wp.run = f.run AND wp.pair = f.pair
),
rolled AS (
    SELECT l.run, l.src_worker, l.dst_worker, widths.width, (l.k * base.g) // widths.width AS kb, sum(l.bytes) AS bytes
    FROM labelled AS l
    CROSS JOIN widths
    CROSS JOIN base
    GROUP BY ALL
),
stats AS (
    SELECT r.run, r.src_worker, r.dst_worker, r.width,
           (any_value(w.hi_ns) - 1) // r.width - any_value(w.lo_ns) // r.width + 1 AS bins,
           count(*) AS busy_bins, sum(r.bytes) AS total, max(r.bytes) AS peak
    FROM rolled AS r
    JOIN win AS w ON w.run = r.run
    GROUP BY r.run, r.src_worker, r.dst_worker, r.width
)
SELECT run, src_worker, dst_worker, width AS bin_ns, bins, busy_bins,
       total * 8.0 / (bins * width) AS mean_gbps,
       peak * 8.0 / width AS peak_gbps,
       peak * bins / total AS peak_to_mean
FROM stats
ORDER BY run, src_worker, dst_worker, bin_ns;

CREATE OR REPLACE VIEW burstiness AS SELECT * FROM burstiness();
