-- Bytes per training step, per run and per rank (the input of the paper's Sec. VI model).
-- Kind: answer
-- Key: run
-- Headline: steps, step_s, mb_per_step, payload_ratio
-- Partition: run
--
-- Semantics: the notebook resampled bytes_per_sec into bins of the mean step duration over the
-- whole capture (idle head and tail included, after a +7200 s clock shift) and took the mean bin,
-- in MB. Fixed here: the bytes are those of the packets between the first and the last logged
-- training step, window (first, last], which holds Batch rows − 1 whole steps, divided by that
-- number of steps; no resampling, no idle time, integer UTC ns.
-- For a synchronous all-reduce each rank sends 2(N−1)/N × the gradient bytes per step (every
-- S-SGD strategy moves 2(N−1)·M in total); `expected_rank_bytes` is that figure when the run's
-- gradient size is known (`run_meta.grad_bytes`), and `payload_ratio` compares it with the
-- transport payload each rank actually sent. Frame bytes add L2–L4 headers and ACKs on top.
-- Payload is the TCP/UDP payload (l4_payload_len), and for RoCE packets the RDMA payload
-- (rdma_payload_len: without BTH, extension headers and ICRC; RDMA ACKs carry none), as in
-- `topology_check`.
-- A run without packets (counters alone: `[capture] method = "counters"`) takes each worker's bytes sent
-- from its NIC's transmit counter instead (`nic_tx`: the RDMA port's port_xmit_data where the worker
-- has one, else the interface's tx_bytes), each sample's delta shared by time over the window as in
-- `nic_util`; a counter counts every frame the interface sent (ACKs, ARP and retransmissions too), so
-- its bytes are frame bytes and the payload columns are NULL.
--
-- Parameters:
--   runs   list of run names; NULL = every run with ≥ 2 logged steps
-- Columns:
--   run, n_workers
--   steps                 whole steps in the window (Batch rows − 1)
--   step_s                mean step duration, seconds
--   bytes                 frame bytes of all packets in the window, bytes
--   payload_bytes         transport payload bytes (RDMA payload for RoCE) of all packets in the window, bytes
--   mb_per_step           bytes / steps / 1e6, MB (all workers together: the paper's "data")
--   payload_mb_per_step   payload_bytes / steps / 1e6, MB
--   rank_bytes_per_step   mean over workers of the frame bytes each sent per step, bytes
--   rank_payload_per_step mean over workers of the payload bytes each sent per step, bytes
--   rank_payload_min, rank_payload_max   spread of the per-worker payload bytes per step, bytes
--   header_overhead       (frame − payload) / payload bytes sent by the workers
--   grad_bytes            gradient bytes per step from run metadata; NULL if unknown
--   expected_rank_bytes   2(N−1)/N · grad_bytes, bytes; NULL if grad_bytes unknown
--   payload_ratio         rank_payload_per_step / expected_rank_bytes
--   bytes_from            packets | counters (a run without packets: its NIC counters; payload NULL)
CREATE OR REPLACE MACRO data_per_step(runs := NULL) AS TABLE
WITH
lw AS (SELECT * FROM train_window(runs := runs)),
sent AS (
    SELECT p.run, p.src_ip, sum(p.frame_len)::BIGINT AS bytes, coalesce(sum(coalesce(p.rdma_payload_len, p.l4_payload_len)), 0)::BIGINT AS payload
    FROM packets AS p
    JOIN lw ON lw.run = p.run
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.ts_ns > lw.t_first AND p.ts_ns <= lw.t_last
    GROUP BY p.run, p.src_ip
),
nic AS (
    -- runs without packets: each worker's transmit counter over the window, a sample's delta shared by time
    SELECT t.run, t.worker,
           sum(t.delta * (least(t.t1, lw.t_last) - greatest(t.t0, lw.t_first)) / (t.t1 - t.t0))::BIGINT AS bytes
    FROM nic_tx(runs := runs) AS t
    JOIN lw ON lw.run = t.run
    WHERE t.run NOT IN (SELECT run FROM sent) AND t.delta IS NOT NULL AND t.t1 > lw.t_first AND t.t0 < lw.t_last
    GROUP BY t.run, t.worker
),
totals AS (
    SELECT run, sum(bytes)::BIGINT AS bytes, sum(payload)::BIGINT AS payload_bytes, 'packets' AS bytes_from
    FROM sent GROUP BY run
    UNION ALL
    SELECT run, sum(bytes)::BIGINT, NULL, 'counters' FROM nic GROUP BY run
),
ranks AS (
    SELECT w.run, w.worker, coalesce(s.bytes, n.bytes, 0) AS bytes,
           CASE WHEN n.run IS NULL THEN coalesce(s.payload, 0) END AS payload
    FROM workers AS w
    LEFT JOIN sent AS s ON s.run = w.run AND s.src_ip = w.ip
    LEFT JOIN nic AS n ON n.run = w.run AND n.worker = w.worker
    WHERE w.run IN (SELECT run FROM lw)
),
per_rank AS (
    SELECT run, count(*) AS n_workers, avg(bytes) AS rank_bytes, avg(payload) AS rank_payload,
           min(payload) AS rank_payload_min, max(payload) AS rank_payload_max,
           (sum(bytes) - sum(payload)) / nullif(sum(payload), 0) AS header_overhead
    FROM ranks
    GROUP BY run
)
SELECT
    lw.run,
    coalesce(m.n_workers, r.n_workers) AS n_workers,
    lw.steps,
    (lw.t_last - lw.t_first) / 1e9 / lw.steps AS step_s,
    coalesce(t.bytes, 0)::BIGINT AS bytes,
    CASE WHEN t.bytes_from = 'counters' THEN NULL ELSE coalesce(t.payload_bytes, 0) END::BIGINT AS payload_bytes,
    coalesce(t.bytes, 0) / lw.steps / 1e6 AS mb_per_step,
    CASE WHEN t.bytes_from = 'counters' THEN NULL ELSE coalesce(t.payload_bytes, 0) END / lw.steps / 1e6
        AS payload_mb_per_step,
    r.rank_bytes / lw.steps AS rank_bytes_per_step,
    r.rank_payload / lw.steps AS rank_payload_per_step,
    r.rank_payload_min / lw.steps AS rank_payload_min,
    r.rank_payload_max / lw.steps AS rank_payload_max,
    r.header_overhead,
    m.grad_bytes::BIGINT AS grad_bytes,
    2.0 * (coalesce(m.n_workers, r.n_workers) - 1) / coalesce(m.n_workers, r.n_workers) * m.grad_bytes
        AS expected_rank_bytes,
    (r.rank_payload / lw.steps)
        / (2.0 * (coalesce(m.n_workers, r.n_workers) - 1) / coalesce(m.n_workers, r.n_workers) * m.grad_bytes)
        AS payload_ratio,
    coalesce(t.bytes_from, 'packets') AS bytes_from
FROM lw
LEFT JOIN totals AS t ON t.run = lw.run
LEFT JOIN per_rank AS r ON r.run = lw.run
LEFT JOIN run_meta AS m ON m.run = lw.run
ORDER BY lw.run;

CREATE OR REPLACE VIEW data_per_step AS SELECT * FROM data_per_step();
