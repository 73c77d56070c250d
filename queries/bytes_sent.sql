-- Bytes each worker sent, and the run's total (Fig. 3).
-- Kind: answer
-- Key: run, worker
-- Headline: bytes, share, packets
-- Partition: run
--
-- Semantics: the notebook's bytes_sent.json, groupby(ip.src) of frame.len per run, summed over the
-- workers for Fig. 3's "total transmitted volume". Grouped by source address, which is the sender
-- whichever capture saw the packet; only sources that are workers of the run are kept.
-- RoCEv2 frames count like any other, by frame_len (RDMA payload per queue pair: `rdma_flows`).
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run, worker, ip   sender (worker label and address)
--   bytes             sum of frame_len sent by the worker, bytes
--   packets           packets sent by the worker
--   run_bytes         sum of bytes over the run's workers, bytes
--   share             bytes / run_bytes
CREATE OR REPLACE MACRO bytes_sent(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH agg AS (
    SELECT run, src_ip, sum(frame_len)::BIGINT AS bytes, count(*) AS packets
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE src_ip IS NOT NULL
    GROUP BY run, src_ip
)
SELECT a.run, w.worker, a.src_ip AS ip, a.bytes, a.packets,
       sum(a.bytes) OVER (PARTITION BY a.run)::BIGINT AS run_bytes,
       a.bytes / sum(a.bytes) OVER (PARTITION BY a.run) AS share
FROM agg AS a
JOIN workers AS w ON w.run = a.run AND w.ip = a.src_ip
ORDER BY a.run, w.worker;

CREATE OR REPLACE VIEW bytes_sent AS SELECT * FROM bytes_sent();
