-- Bytes and Gbit/s in contiguous, zero-filled time bins, per directed worker pair or per run.
-- Kind: building block
-- Partition: run
--
-- Why: `link_util` (per worker pair) and `link_total` (all traffic of a run) differ only in what a
-- series is, so the binning, the window's bin span and the zero-filling are written once, here.
-- by_pair := true: one series per directed worker pair that carries ≥ 1 packet between two workers
-- in the window; by_pair := false: one series per run holding every packet, workers or not
-- (src_worker, dst_worker NULL). Each series gets every bin from the run's first to its last
-- packet (or the window's), zeros included. Bins are aligned to multiples of bin_ns since the Unix
-- epoch (pandas' resample default), so bins of different widths nest; the first bin may start up
-- to one bin before the run's first packet (t_s slightly negative). RoCEv2 frames count like any
-- other, by frame_len; `congestion` puts their ECN-CE marks and CNPs beside these bytes.
-- Speed: a width of whole milliseconds with no window sums the bins ingest kept per run, worker,
-- address pair and millisecond (`link_bins`, ~100x fewer rows than packets in training traffic);
-- any other one pass over ts_ns, frame_len, run (and src_ip, dst_ip per pair). Both group on two
-- integers: the series key (the run and address pair combined into one hash, as `worker_pairs`
-- holds it for the labels; DuckDB hashes a Parquet dictionary cheaply) and the bin index.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms; 100 000 = 100 µs works)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
--   by_pair  true = a series per directed worker pair, false = a series per run (default true)
-- Columns:
--   run, src_worker, dst_worker   the series: a directed pair (worker labels W1..Wn), or NULL, NULL
--   bin_start_ns                  bin start, UTC ns (a multiple of bin_ns)
--   bin_ns                        bin width, ns
--   t_s                           bin start, seconds after the run's first packet
--   bytes                         sum of frame_len (L2 frame bytes, headers included)
--   gbps                          bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_series(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL,
                                    by_pair := true) AS TABLE
WITH
rows AS (
    -- the millisecond bins ingest keeps (`link_bins`) when the width is whole ms and no window is asked
    -- (constant filters: DuckDB plans only one branch), else the packets; each with its bin index
    SELECT run, src_ip, dst_ip, ms // (bin_ns::BIGINT // 1000000) AS k, bytes, first_ns
    FROM link_bins
    WHERE from_ns IS NULL AND to_ns IS NULL AND bin_ns::BIGINT % 1000000 = 0
        AND (runs IS NULL OR list_contains(runs, run))
    UNION ALL
    SELECT run, src_ip, dst_ip, ts_ns // bin_ns::BIGINT AS k, frame_len AS bytes, ts_ns AS first_ns
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE (from_ns IS NULL AND to_ns IS NULL AND bin_ns::BIGINT % 1000000 = 0) IS NOT TRUE
),
binned AS (
    -- integer keys only: run and (by_pair) address pair as one hash (see worker_pairs), and the bin index
    SELECT xor(CASE WHEN by_pair THEN xor(hash(src_ip), hash(dst_ip) >> 1) ELSE 0 END, hash(run) >> 2) AS series,
           k, any_value(run) AS run, sum(bytes)::BIGINT AS bytes, min(first_ns) AS first_ns
    FROM rows
    GROUP BY series, k
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
labelled AS (  -- the series to show: worker pairs that carry traffic, labelled, or each run whole
    SELECT DISTINCT b.run, wp.src_worker, wp.dst_worker, b.series
    FROM binned AS b
    LEFT JOIN worker_pairs AS wp ON by_pair AND wp.pair = b.series
    WHERE NOT by_pair OR wp.pair IS NOT NULL
),
checked AS (  -- the grid's rows, counted once its series are known: grid_check stops one that is too large
    SELECT grid_check(sum((sp.k_hi - sp.k_lo + 1) * l.n), bin_ns) AS zero
    FROM span AS sp
    JOIN (SELECT run, count(*) AS n FROM labelled GROUP BY run) AS l ON l.run = sp.run
),
grid AS (  -- `c.zero = 0`: joined to the check, no bin is made before it has run
    SELECT s.run, s.src_worker, s.dst_worker, s.series, sp.start_ns, g.k
    FROM labelled AS s
    JOIN span AS sp ON sp.run = s.run
    CROSS JOIN checked AS c,
    range(sp.k_lo, sp.k_hi + 1) AS g(k)
    WHERE c.zero = 0
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
LEFT JOIN binned AS b ON b.series = g.series AND b.k = g.k;

CREATE OR REPLACE VIEW link_series AS SELECT * FROM link_series();
