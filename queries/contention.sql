-- Per link and time bin: throughput against the link's own steady-state reference, and the windows it was held below.
-- Kind: answer
-- Key: run, src_worker, dst_worker, t_s
-- Headline: gbps, reference_gbps, ratio, below, held_start_s
-- Partition: run
--
-- Semantics: KungFu's adaptive-strategy monitor (session/monitoring.go) takes one throughput as its
-- reference and votes "interference" when a later step's throughput falls below 0.8 × it. Here per
-- directed worker pair, on `link_series`' zero-filled bins:
--   steady bins     bins lying wholly inside the run's training window [first, last logged step]
--                   (`link_steady`); every bin of the window asked for when the run has no log
--   reference_gbps  the median Gbit/s of the link's busy steady bins (bytes > 0; for an even count
--                   the mean of the two middle ones). Busy only: a data-parallel link is idle while
--                   its workers compute, and those bins say nothing about the link's speed
--   below           a busy steady bin with gbps < threshold × reference_gbps
--   held window     a maximal run of consecutive busy steady bins that are all below, of at least
--                   min_bins busy bins; idle bins between them do not break it and count toward its
--                   span but not its min_bins (a slowed link stays slow across the compute gaps of
--                   its steps); a busy bin at or above the threshold ends it
-- Bin width: at least a training step (default 100 ms). Within a step a data-parallel link bursts
-- during the all-reduce and idles while its workers compute, so bins much shorter than a step
-- measure where a bin boundary cut the burst, not the link: on the embedded sample (65 ms steps)
-- 10 ms bins find "held" windows on 10 of the 12 links of a healthy run, 100 ms bins none.
-- A link whose busy bins all run slow has a low reference and no window: compare runs with `compare`.
--
-- Parameters:
--   bin_ns      bin width, ns (default 100 000 000 = 100 ms; see above)
--   threshold   fraction of the reference below which a busy bin counts as below (default 0.8, KungFu's); range (0, 1]
--   min_bins    busy bins in a row a held window needs at least (default 3); range [1, ∞), a whole number
--   runs        list of run names; NULL = every run
--   from_ns     window start, ns after the run's first packet; NULL = run start
--   to_ns       window end (exclusive), ns after the run's first packet; NULL = run end
--   held_only   true = only the bins of held windows (default false: every bin)
-- Columns:
--   run, src_worker, dst_worker   directed worker pair (labels W1..Wn) with ≥ 1 packet in the window
--   bin_start_ns                  bin start, UTC ns (a multiple of bin_ns)
--   bin_ns                        bin width, ns
--   t_s                           bin start, seconds after the run's first packet
--   bytes                         sum of frame_len in the bin, bytes
--   gbps                          bytes·8 / bin_ns, Gbit/s
--   steady                        the bin lies inside the training window (the reference's span)
--   reference_gbps                the link's reference, Gbit/s; NULL when it has no busy steady bin
--   reference_bins                busy steady bins the reference is the median of
--   ratio                         gbps / reference_gbps
--   below                         busy, steady and ratio < threshold
--   held_start_s, held_end_s      the held window this bin is in: start of its first bin, end of its
--                                 last, seconds after the run's first packet; NULL outside one
--   held_bins                     busy bins in that window
--   held_ratio                    mean ratio of those busy bins
CREATE OR REPLACE MACRO contention(bin_ns := 100000000, threshold := 0.8, min_bins := 3, runs := NULL,
                                   from_ns := NULL, to_ns := NULL, held_only := false) AS TABLE
WITH
series AS (SELECT * FROM link_steady(bin_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns)),
reference AS (
    SELECT run, src_worker, dst_worker, median(gbps) AS reference_gbps, count(*) AS reference_bins
    FROM series
    WHERE steady AND bytes > 0
    GROUP BY run, src_worker, dst_worker
),
judged AS (  -- busy steady bins, numbered per link, with their verdict
    SELECT s.run, s.src_worker, s.dst_worker, s.bin_start_ns, s.t_s, s.gbps / r.reference_gbps AS ratio,
           s.gbps < threshold * r.reference_gbps AS below,
           row_number() OVER (PARTITION BY s.run, s.src_worker, s.dst_worker ORDER BY s.bin_start_ns) AS i
    FROM series AS s
    JOIN reference AS r USING (run, src_worker, dst_worker)
    WHERE s.steady AND s.bytes > 0
),
islands AS (  -- consecutive below bins share i − (rank among below bins)
    SELECT *, i - row_number() OVER (PARTITION BY run, src_worker, dst_worker ORDER BY bin_start_ns) AS island
    FROM judged
    WHERE below
),
held AS (
    -- one value per window for all its bins: its first bin's t_s, and a mean summed in bin order (a
    -- float sum's last digit depends on the order of its terms, which threads do not keep)
    SELECT run, src_worker, dst_worker, island, min(bin_start_ns) AS first_ns, max(bin_start_ns) AS last_ns,
           min(t_s) AS first_s, count(*) AS held_bins, list_avg(list(ratio ORDER BY bin_start_ns)) AS held_ratio
    FROM islands
    GROUP BY run, src_worker, dst_worker, island
    HAVING count(*) >= min_bins
)
SELECT
    s.run, s.src_worker, s.dst_worker, s.bin_start_ns, s.bin_ns, s.t_s, s.bytes, s.gbps, s.steady,
    r.reference_gbps,
    coalesce(r.reference_bins, 0) AS reference_bins,
    s.gbps / r.reference_gbps AS ratio,
    coalesce(s.steady AND s.bytes > 0 AND s.gbps < threshold * r.reference_gbps, false) AS below,
    h.first_s AS held_start_s,
    h.first_s + (h.last_ns + s.bin_ns - h.first_ns) / 1e9 AS held_end_s,
    h.held_bins,
    h.held_ratio
FROM series AS s
LEFT JOIN reference AS r USING (run, src_worker, dst_worker)
LEFT JOIN held AS h
    ON h.run = s.run AND h.src_worker = s.src_worker AND h.dst_worker = s.dst_worker
    AND s.bin_start_ns BETWEEN h.first_ns AND h.last_ns
WHERE NOT held_only::BOOLEAN OR h.island IS NOT NULL
ORDER BY s.run, s.src_worker, s.dst_worker, s.bin_start_ns;

CREATE OR REPLACE VIEW contention AS SELECT * FROM contention();
