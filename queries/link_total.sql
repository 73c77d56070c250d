-- All traffic of a run together: bytes and Gbit/s in contiguous, zero-filled time bins.
-- Kind: answer
--
-- Semantics: the notebook's (misnamed) bytes_per_sec.json, total frame.len of every packet of the
-- run per 1 ms bin, zero-filled from first to last packet. Fixed here: integer UTC ns instead of
-- naive local-time strings, any bin width. Unlike `link_util`, traffic to or from non-workers
-- counts too, as it did there. Bins are aligned to multiples of bin_ns since the Unix epoch, as
-- in `link_util` (the first may start up to one bin before the run's first packet).
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   bin_start_ns   bin start, UTC ns (a multiple of bin_ns)
--   bin_ns         bin width, ns
--   t_s            bin start, seconds after the run's first packet
--   bytes          sum of frame_len in the bin, bytes
--   gbps           bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_total(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
binned AS (
    SELECT run, ts_ns // bin_ns::BIGINT AS k, sum(frame_len)::BIGINT AS bytes, min(ts_ns) AS first_ns
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    GROUP BY run, k
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
grid AS (
    SELECT sp.run, sp.start_ns, g.k
    FROM span AS sp, range(sp.k_lo, sp.k_hi + 1) AS g(k)
)
SELECT
    g.run,
    g.k * bin_ns::BIGINT AS bin_start_ns,
    bin_ns::BIGINT AS bin_ns,
    (g.k * bin_ns::BIGINT - g.start_ns) / 1e9 AS t_s,
    coalesce(b.bytes, 0)::BIGINT AS bytes,
    coalesce(b.bytes, 0) * 8.0 / bin_ns::BIGINT AS gbps
FROM grid AS g
LEFT JOIN binned AS b ON b.run = g.run AND b.k = g.k
ORDER BY g.run, bin_start_ns;

CREATE OR REPLACE VIEW link_total AS SELECT * FROM link_total();
