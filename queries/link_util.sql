-- Per directed worker pair: bytes and Gbit/s in contiguous, zero-filled time bins (Figs. 7, 9).
-- Kind: answer
--
-- Semantics: the notebook's utilization.json (bytes per 1 ms per directed IP pair), then ×8/1e6,
-- a 10 ms resample and /10. Fixed here: bins sit on integer UTC ns, not on row numbers of a
-- local-time pivot (the notebook placed row i at i ms whatever its timestamp, and a millisecond
-- no pair covered was missing rather than zero); every pair gets every bin from the run's first
-- to its last packet (or the window's), zeros included, at any width down to 100 µs.
-- Bins are aligned to multiples of bin_ns since the Unix epoch (pandas' resample default), so
-- the bins of different widths nest; the first bin may start up to one bin before the run's first
-- packet (t_s slightly negative) and the last may end after its last packet.
-- Gbit/s = bytes·8 / bin_ns (bits per ns).
-- Speed: one pass over ts_ns, frame_len, src_ip, dst_ip and run, grouped on two integers: the run
-- and address pair combined into one hash (DuckDB hashes a Parquet dictionary cheaply) and the bin
-- index; `worker_pairs` holds the same key for the labels.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms; 100 000 = 100 µs works)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run, src_worker, dst_worker   directed pair (worker labels W1..Wn); only pairs with ≥ 1 packet
--                                 between two workers in the window appear
--   bin_start_ns                  bin start, UTC ns (a multiple of bin_ns)
--   bin_ns                        bin width, ns
--   t_s                           bin start, seconds after the run's first packet
--   bytes                         sum of frame_len (L2 frame bytes, headers included)
--   gbps                          bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_util(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
binned AS (
    -- integer keys only: run and address pair as one hash (see worker_pairs), and the bin index
    SELECT xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2) AS pair, ts_ns // bin_ns::BIGINT AS k,
           any_value(run) AS run, sum(frame_len)::BIGINT AS bytes, min(ts_ns) AS first_ns
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    GROUP BY pair, k
),
windowed AS (  -- only planned when a window is asked for (constant-false filter otherwise)
    SELECT run, start_ns, lo_ns, hi_ns
    FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE from_ns IS NOT NULL OR to_ns IS NOT NULL
),
span AS (
    SELECT b.run,
           coalesce(any_value(w.start_ns), min(b.first_ns)) AS start_ns,
           coalesce(any_value(w.lo_ns) // bin_ns::BIGINT, min(b.k)) AS k_lo,
           coalesce((any_value(w.hi_ns) - 1) // bin_ns::BIGINT, max(b.k)) AS k_hi
    FROM binned AS b
    LEFT JOIN windowed AS w ON w.run = b.run
    GROUP BY b.run
),
pairs AS (  -- the worker pairs that carry traffic, labelled
    SELECT DISTINCT wp.run, wp.src_worker, wp.dst_worker, wp.pair
    FROM binned AS b
    JOIN worker_pairs AS wp ON wp.pair = b.pair
),
grid AS (
    SELECT pr.run, pr.src_worker, pr.dst_worker, pr.pair, sp.start_ns, g.k
    FROM pairs AS pr
    JOIN span AS sp ON sp.run = pr.run,
    range(sp.k_lo, sp.k_hi + 1) AS g(k)
)
SELECT
    g.run,
    g.src_worker,
    g.dst_worker,
    g.k * bin_ns::BIGINT AS bin_start_ns,
    bin_ns::BIGINT AS bin_ns,
    (g.k * bin_ns::BIGINT - g.start_ns) / 1e9 AS t_s,
    coalesce(b.bytes, 0)::BIGINT AS bytes,
    coalesce(b.bytes, 0) * 8.0 / bin_ns::BIGINT AS gbps
FROM grid AS g
LEFT JOIN binned AS b ON b.pair = g.pair AND b.k = g.k
ORDER BY g.run, g.src_worker, g.dst_worker, bin_start_ns;

CREATE OR REPLACE VIEW link_util AS SELECT * FROM link_util();
