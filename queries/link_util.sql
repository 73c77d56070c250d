-- Per directed worker pair: bytes and Gbit/s in contiguous, zero-filled time bins (Figs. 7, 9).
--
-- Semantics: the notebook's utilization.json (bytes per 1 ms per directed IP pair), then ×8/1e6,
-- a 10 ms resample and /10. Fixed here: bins are anchored at the window start (the run's first
-- packet unless from_ns is given) on integer UTC ns, not on row numbers of a local-time pivot
-- (the notebook placed row i at i ms whatever its timestamp, and a millisecond no pair covered was
-- missing rather than zero); every pair gets every bin from window start to end, zeros included.
-- Gbit/s = bytes·8 / bin_ns (bits per ns), so the last bin of a run, which is cut short by the
-- run's end, reads lower than the rate inside it.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms; 100 000 = 100 µs works)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run, src_worker, dst_worker   directed pair (worker labels W1..Wn); only pairs with ≥ 1 packet
--                                 between two workers in the window appear
--   bin_start_ns                  bin start, UTC ns
--   bin_ns                        bin width, ns
--   t_s                           bin start, seconds after the run's first packet
--   bytes                         sum of frame_len (L2 frame bytes, headers included)
--   gbps                          bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_util(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
win AS (
    SELECT run, start_ns, lo_ns, hi_ns
    FROM run_bounds(runs := runs, from_ns := from_ns, to_ns := to_ns)
),
binned AS (
    SELECT p.run, p.src_ip, p.dst_ip, (p.ts_ns - w.lo_ns) // bin_ns::BIGINT AS k, sum(p.frame_len) AS bytes
    FROM packets AS p
    JOIN win AS w ON p.run = w.run
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.ts_ns >= w.lo_ns AND p.ts_ns < w.hi_ns
    GROUP BY ALL
),
labelled AS (
    SELECT b.run, s.worker AS src_worker, d.worker AS dst_worker, b.k, sum(b.bytes)::BIGINT AS bytes
    FROM binned AS b
    JOIN workers AS s ON s.run = b.run AND s.ip = b.src_ip
    JOIN workers AS d ON d.run = b.run AND d.ip = b.dst_ip
    GROUP BY ALL
),
grid AS (
    SELECT pr.run, pr.src_worker, pr.dst_worker, w.start_ns, w.lo_ns, g.k
    FROM (SELECT DISTINCT run, src_worker, dst_worker FROM labelled) AS pr
    JOIN win AS w ON pr.run = w.run,
    range(0, (w.hi_ns - w.lo_ns + bin_ns::BIGINT - 1) // bin_ns::BIGINT) AS g(k)
)
SELECT
    g.run,
    g.src_worker,
    g.dst_worker,
    g.lo_ns + g.k * bin_ns::BIGINT AS bin_start_ns,
    bin_ns::BIGINT AS bin_ns,
    (g.lo_ns - g.start_ns + g.k * bin_ns::BIGINT) / 1e9 AS t_s,
    coalesce(l.bytes, 0)::BIGINT AS bytes,
    coalesce(l.bytes, 0) * 8.0 / bin_ns::BIGINT AS gbps
FROM grid AS g
LEFT JOIN labelled AS l
    ON l.run = g.run AND l.src_worker = g.src_worker AND l.dst_worker = g.dst_worker AND l.k = g.k
ORDER BY g.run, g.src_worker, g.dst_worker, bin_start_ns;

CREATE OR REPLACE VIEW link_util AS SELECT * FROM link_util();
