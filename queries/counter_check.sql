-- Per worker and direction: the interface counters' bytes against the captured frames' bytes, per bin of samples.
-- Kind: answer
-- Key: run, worker, direction, t_s
-- Headline: diff_pct, counted_bytes, captured_bytes
-- Needs: counters
-- Partition: run
--
-- Semantics: where a run has both, each sample of a worker's /proc/net/dev bytes (`counters`, source
-- netdev: tx_bytes, rx_bytes) is set against the frames of the run's captures that the worker sent
-- (src_ip its address: tx) or was sent (dst_ip: rx) after the previous sample and up to this one
-- (each frame goes to the first sample at or after its timestamp), summed per bin of bin_ns by the
-- samples' times: the bins follow the samples, so no sample is split and the two sides count the same
-- span. What each counts: the counter, every frame the interface sent or received, L2 header
-- included, no FCS (Linux drivers leave it out); a capture's frame_len, the frame as it left or
-- reached the interface, no FCS, VLAN tags when the capture saw them. So the counters run ahead by
-- what the captures do not hold: ARP, IPv6 and other non-IPv4 frames, frames a capture filter left
-- out (the paper's `src host` captures at every worker hold every frame between workers once), frames
-- the capture dropped (run.toml's `dropped_by_kernel`). At a bin's edges: a sample's time is known to
-- ± half its read time (counter_sources.read_p99_us), in which a line-rate burst moves tens of kB; a
-- received frame is counted at the receiver but captured (sender-side) when sent, so one in flight
-- at a sample falls in the next bin. RDMA port counters are not compared: their traffic is not in a
-- host's capture.
--
-- Parameters:
--   bin_ns   bin width, ns (default 100 000 000 = 100 ms; at least one sample each); range (0, ∞)
--   runs     list of run names; NULL = every run
-- Columns:
--   run, worker       the run and the worker whose sampler file it is
--   direction         tx | rx
--   bin_start_ns      bin start, UTC ns (a multiple of bin_ns): the samples taken in the bin
--   t_s               bin start, seconds after the run's first packet
--   samples           samples in the bin (count)
--   counted_bytes     the interface counter's deltas, bytes
--   captured_bytes    frame_len of the captured frames of those samples' spans, bytes
--   diff_bytes        counted_bytes − captured_bytes, bytes
--   diff_pct          diff_bytes / captured_bytes × 100, %; NULL where nothing was captured
CREATE OR REPLACE MACRO counter_check(bin_ns := 100000000, runs := NULL) AS TABLE
WITH samples AS (
    SELECT run, worker, CASE counter WHEN 'tx_bytes' THEN 'tx' ELSE 'rx' END AS direction, ts_ns, delta
    FROM counters
    WHERE source = 'netdev' AND counter IN ('tx_bytes', 'rx_bytes') AND worker IS NOT NULL
      AND (runs IS NULL OR list_contains(runs, run))
),
frames AS (
    SELECT p.run, w.worker, CASE WHEN p.src_ip = w.ip THEN 'tx' ELSE 'rx' END AS direction, p.ts_ns, p.frame_len
    FROM packets AS p
    JOIN workers AS w ON w.run = p.run AND w.ip IN (p.src_ip, p.dst_ip)
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.run IN (SELECT DISTINCT run FROM samples)
),
placed AS (
    -- each frame at the first sample at or after it (none after the last sample: left out)
    SELECT f.run, f.worker, f.direction, s.ts_ns AS sample_ns, sum(f.frame_len) AS bytes
    FROM frames AS f
    ASOF JOIN (SELECT run, worker, direction, ts_ns FROM samples) AS s
        ON s.run = f.run AND s.worker = f.worker AND s.direction = f.direction AND f.ts_ns <= s.ts_ns
    GROUP BY ALL
),
origin AS (
    SELECT run, min(first_ts_ns) AS start_ns FROM captures WHERE first_ts_ns IS NOT NULL GROUP BY run
),
binned AS (
    -- a sample without a delta (the first, one after a failed read) takes its frames with it
    SELECT s.run, s.worker, s.direction, (s.ts_ns // bin_ns) * bin_ns AS bin_start_ns, count(*) AS samples,
           sum(s.delta) AS counted_bytes, coalesce(sum(p.bytes), 0) AS captured_bytes
    FROM samples AS s
    LEFT JOIN placed AS p
        ON p.run = s.run AND p.worker = s.worker AND p.direction = s.direction AND p.sample_ns = s.ts_ns
    WHERE s.delta IS NOT NULL
    GROUP BY ALL
)
SELECT b.run, b.worker, b.direction, b.bin_start_ns, (b.bin_start_ns - o.start_ns) / 1e9 AS t_s, b.samples,
       b.counted_bytes, b.captured_bytes, b.counted_bytes - b.captured_bytes AS diff_bytes,
       CASE WHEN b.captured_bytes > 0
            THEN (b.counted_bytes - b.captured_bytes) * 100.0 / b.captured_bytes END AS diff_pct
FROM binned AS b
JOIN origin AS o ON o.run = b.run
ORDER BY b.run, b.worker, b.direction, b.bin_start_ns;

CREATE OR REPLACE VIEW counter_check AS SELECT * FROM counter_check();
