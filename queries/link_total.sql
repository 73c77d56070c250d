-- All traffic of a run together: bytes and Gbit/s in contiguous, zero-filled time bins.
--
-- Semantics: the notebook's (misnamed) bytes_per_sec.json, total frame.len of every packet of the
-- run per 1 ms bin, zero-filled from first to last packet. Fixed here: integer UTC ns bins anchored
-- at the window start instead of naive local-time strings, any bin width. Unlike `link_util`,
-- traffic to or from non-workers counts too, as it did there.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   bin_start_ns   bin start, UTC ns
--   bin_ns         bin width, ns
--   t_s            bin start, seconds after the run's first packet
--   bytes          sum of frame_len in the bin, bytes
--   gbps           bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_total(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
win AS (
    SELECT run, start_ns, lo_ns, hi_ns
    FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
),
binned AS (
    SELECT p.run, (p.ts_ns - w.lo_ns) // bin_ns::BIGINT AS k, sum(p.frame_len)::BIGINT AS bytes
    FROM packets AS p
    JOIN win AS w ON p.run = w.run
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.ts_ns >= w.lo_ns AND p.ts_ns < w.hi_ns
    GROUP BY ALL
),
grid AS (
    SELECT w.run, w.start_ns, w.lo_ns, g.k
    FROM win AS w, range(0, (w.hi_ns - w.lo_ns + bin_ns::BIGINT - 1) // bin_ns::BIGINT) AS g(k)
)
SELECT
    g.run,
    g.lo_ns + g.k * bin_ns::BIGINT AS bin_start_ns,
    bin_ns::BIGINT AS bin_ns,
    (g.lo_ns - g.start_ns + g.k * bin_ns::BIGINT) / 1e9 AS t_s,
    coalesce(b.bytes, 0)::BIGINT AS bytes,
    coalesce(b.bytes, 0) * 8.0 / bin_ns::BIGINT AS gbps
FROM grid AS g
LEFT JOIN binned AS b ON b.run = g.run AND b.k = g.k
ORDER BY g.run, bin_start_ns;

CREATE OR REPLACE VIEW link_total AS SELECT * FROM link_total();
