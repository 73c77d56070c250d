-- Bytes per directed (src, dst) address pair per run, with worker labels (Fig. 4).
-- Kind: answer
-- Key: run, src_worker, dst_worker
-- Headline: bytes, packets
-- Partition: run
--
-- Semantics: the notebook's joint_sent_received.json, groupby(ip.src, ip.dst) of frame.len over the
-- whole capture (idle head and tail, ACKs and non-training traffic included); packets without an IP
-- header (ARP, …) drop out as they did there. Each packet counts once (ingest keeps the sender's
-- copy). For the mean over a set of runs (Fig. 4's heatmap) see `flow_matrix_mean`.
-- RoCEv2 frames count like any other, by frame_len (their RDMA payload is `rdma_flows`'
-- message_bytes, per queue pair); RoCE v1 and InfiniBand-side frames have no IP header and drop out.
-- Speed: reads run, src_ip, dst_ip, frame_len only; addresses are grouped by their hash (computed
-- once per Parquet dictionary entry), which is cheaper than grouping two string columns.
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   src_worker, dst_worker   worker labels W1..Wn; NULL for an address that is not a worker of the run
--   src_ip, dst_ip           addresses
--   bytes                    sum of frame_len, bytes (L2 frames, headers included)
--   packets                  packet count
CREATE OR REPLACE MACRO flow_matrix(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH agg AS (
    -- one integer grouping key per run and address pair (see worker_pairs); any_value recovers the
    -- names, and all-NULL address groups are dropped after
    SELECT xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2) AS pair, any_value(run) AS run,
           any_value(src_ip) AS src_ip, any_value(dst_ip) AS dst_ip, sum(frame_len)::BIGINT AS bytes,
           count(*) AS packets
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    GROUP BY pair
)
SELECT a.run, s.worker AS src_worker, d.worker AS dst_worker, a.src_ip, a.dst_ip, a.bytes, a.packets
FROM agg AS a
LEFT JOIN workers AS s ON s.run = a.run AND s.ip = a.src_ip
LEFT JOIN workers AS d ON d.run = a.run AND d.ip = a.dst_ip
WHERE a.src_ip IS NOT NULL AND a.dst_ip IS NOT NULL
ORDER BY a.run, src_worker NULLS LAST, dst_worker NULLS LAST, a.src_ip, a.dst_ip;

CREATE OR REPLACE VIEW flow_matrix AS SELECT * FROM flow_matrix();
