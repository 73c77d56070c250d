-- Per run and directed RDMA flow (src, dst, destination QP): volume, operation mix, PSN sequence, congestion marks.
-- Kind: answer
-- Key: run, src_worker, dst_worker, dest_qp
-- Headline: transport, bytes, messages, psn_repeats, naks, ecn_ce, cnps
-- Needs: rdma
-- Partition: run
--
-- Semantics: a flow is every RoCE packet (rdma_opcode not NULL: RoCEv2, RoCE v1, IPoIB-side) of a run
-- with one (src_ip, dst_ip, rdma_dest_qp), the unit a QP-level summary of tshark counts; RoCE v1 and
-- InfiniBand-side frames have no IP header, so their flows have NULL addresses and are told apart by
-- destination QP alone. Each packet counts once (ingest keeps the sender's copy).
-- The two directions of an RC/UC connection share the UDP source port (the sender's entropy port),
-- and ACKs and READ responses travel towards the requester's QP: a flow is paired with the flow in
-- the opposite direction between the same addresses on the same UDP source port when each is the only
-- flow there, and the paired flow's destination QP is this flow's source QP (`src_qp`). UD packets
-- carry their source QP themselves (DETH), which `src_qp` prefers.
-- Operation mix, in packets, by the BTH opcode's operation (low 5 bits) for the RC/UC/RD/UD transports:
-- SEND (First/Middle/Last/Only, with Immediate or Invalidate), RDMA WRITE (idem), READ Request, READ
-- Response (First/Middle/Last/Only), Compare Swap and Fetch Add, Acknowledge, Atomic Acknowledge;
-- opcode 0x81 is RoCEv2's CNP; everything else (XRC, vendor opcodes) is `other_ops`.
-- PSN sequence: the request packets of a flow (SEND, WRITE, READ Request, atomics) take one PSN each
-- from the requester's send queue, a READ Request as many as its response has packets; READ Response
-- packets take one each from the PSNs their request reserved. So each flow holds up to two sequences
-- (requests, READ responses; UD ones also split by DETH source QP), each in time order (equal
-- timestamps, as microsecond captures have, in PSN order), and a
-- step between consecutive packets of a sequence, taken modulo 2^24 into −2^23 .. 2^23−1, is
--   normal   +1, or any forward step right after a READ Request (requests) or after a READ Response
--            Last/Only (responses: the next read starts at its own request's PSN)
--   gap      any other forward step: PSNs missing from the capture (lost, or captured elsewhere)
--   rewind   a step of 0 or backwards: the sender went back (go-back-N after a NAK, or a timeout)
-- ACKs carry the PSN of the last request they acknowledge (coalesced, so they step freely) and CNPs
-- none that counts: neither is in a sequence. A NAK (AETH syndrome 0x60-0x7f) asks the requester to
-- resend from its PSN; an ECN-CE mark (ecn = 3) on a packet makes its receiver send CNPs towards the
-- sender's QP, so a flow's `cnps` count the congestion notifications it carried back (DCQCN).
-- Byte measures: `bytes` is frame_len (what crossed the link, as in flow_matrix and link_util);
-- `message_bytes` is rdma_payload_len (the RDMA payload: UDP payload less BTH, extension headers,
-- pad and ICRC; 0 for ACKs, READ requests and CNPs).
-- Transport names are tracecore.reader.names.TRANSPORTS' (tests check they agree).
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   src_worker, dst_worker   worker labels W1..Wn; NULL for an address that is not a worker of the run
--   src_ip, dst_ip           addresses; NULL for RoCE v1 / InfiniBand-side frames
--   dest_qp                  destination queue pair (BTH, 24 bit)
--   src_qp                   the sender's queue pair: DETH source QP (UD) or the paired flow's dest_qp;
--                            NULL when neither is known
--   paired                   true when the opposite direction of the connection is in the run
--   src_port                 UDP source port of the flow's packets (CNPs aside) when they share one, else NULL
--   transport                'RC' | 'UC' | 'RD' | 'UD' of its packets other than CNPs; 'CNP' when it
--                            holds only CNPs; 'other' for other transports; 'mixed' for several
--   packets                  packets
--   bytes                    sum of frame_len, bytes (L2 frames, headers included)
--   message_bytes            sum of rdma_payload_len, bytes (RDMA payload)
--   reth_dma_bytes           sum of RETH DMA lengths, bytes (WRITE First/Only: message length;
--                            READ Request: bytes asked for)
--   messages                 messages the flow's requests start (SEND and WRITE First/Only, READ
--                            Requests, atomics)
--   sends, writes, read_requests, read_responses, atomics, acks, atomic_acks, cnps, other_ops
--                            packets of each operation (acks: Acknowledge packets, NAKs included)
--   naks                     packets whose AETH syndrome is a NAK (0x60-0x7f)
--   rnr_naks                 packets whose AETH syndrome is a receiver-not-ready NAK (0x20-0x3f)
--   ecn_ce                   packets marked ECN Congestion Experienced (ecn = 3)
--   psn_min, psn_max         smallest and largest PSN of any packet of the flow
--   psn_first, psn_last      PSN of the flow's first and last packet in time
--   psn_gaps                 forward steps that skip PSNs (see above)
--   psn_skipped              PSNs skipped by those steps
--   psn_repeats              sequence packets whose PSN the sequence already had (retransmissions)
--   psn_rewinds              steps of 0 or backwards (go-back-N restarts, timeouts)
--   first_ns, last_ns        first and last packet of the flow, UTC ns
CREATE OR REPLACE MACRO rdma_flows(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
roce AS (
    -- Speed: flows are grouped by one integer (run, addresses and QP hashed, as `worker_pairs` does for
    -- address pairs; two flows merge only on a 64-bit collision) and operations are small integers:
    -- 0 SEND, 1 WRITE, 2 READ Request, 3 READ Response, 4 atomic, 5 ACK, 6 atomic ACK, 7 CNP, 8 other
    SELECT hash(run, src_ip, dst_ip, rdma_dest_qp) AS flow, run, ts_ns, frame_len, src_ip, dst_ip, src_port,
           ecn, rdma_opcode AS opcode, rdma_dest_qp AS dest_qp, rdma_psn AS psn, rdma_payload_len,
           rdma_reth_dma_len, rdma_aeth_syndrome AS syndrome, rdma_deth_src_qp AS deth_src_qp,
           CASE
               WHEN rdma_opcode = 129 THEN 7
               WHEN rdma_opcode >= 128 THEN 8
               WHEN rdma_opcode & 31 <= 5 OR rdma_opcode & 31 IN (22, 23) THEN 0
               WHEN rdma_opcode & 31 <= 11 THEN 1
               WHEN rdma_opcode & 31 = 12 THEN 2
               WHEN rdma_opcode & 31 <= 16 THEN 3
               WHEN rdma_opcode & 31 = 17 THEN 5
               WHEN rdma_opcode & 31 = 18 THEN 6
               WHEN rdma_opcode & 31 IN (19, 20) THEN 4
               ELSE 8
           END AS op
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE rdma_opcode IS NOT NULL
),
steps AS (  -- each sequence packet (role 0: requests, 1: READ responses) with the step from the one before
    SELECT flow, role, deth_src_qp, psn,
           (psn::BIGINT - lag(psn) OVER seq + 16777216) % 16777216 AS fwd,
           lag(opcode) OVER seq & 31 AS prev_op
    FROM (SELECT *, (op = 3)::INTEGER AS role FROM roce WHERE op <= 4)
    WINDOW seq AS (PARTITION BY flow, role, deth_src_qp ORDER BY ts_ns, psn)
),
sequences AS (
    SELECT flow,
           count(*) FILTER (WHERE fwd BETWEEN 2 AND 8388607 AND prev_op NOT IN (12, 15, 16)) AS gaps,
           coalesce(sum(fwd - 1) FILTER (WHERE fwd BETWEEN 2 AND 8388607 AND prev_op NOT IN (12, 15, 16)), 0)
               AS skipped,
           count(*) - count(DISTINCT psn) AS repeats,
           count(*) FILTER (WHERE fwd = 0 OR fwd >= 8388608) AS rewinds
    FROM steps
    GROUP BY flow, role, deth_src_qp
),
flows AS (
    SELECT flow, any_value(run) AS run, any_value(src_ip) AS src_ip, any_value(dst_ip) AS dst_ip,
           any_value(dest_qp) AS dest_qp,
           count(*) AS packets,
           sum(frame_len)::BIGINT AS bytes,
           coalesce(sum(rdma_payload_len), 0)::BIGINT AS message_bytes,
           coalesce(sum(rdma_reth_dma_len), 0)::BIGINT AS reth_dma_bytes,
           count(*) FILTER (WHERE op IN (2, 4) OR (op <= 1 AND opcode & 31 IN (0, 4, 5, 6, 10, 11, 23))) AS messages,
           count(*) FILTER (WHERE op = 0) AS sends,
           count(*) FILTER (WHERE op = 1) AS writes,
           count(*) FILTER (WHERE op = 2) AS read_requests,
           count(*) FILTER (WHERE op = 3) AS read_responses,
           count(*) FILTER (WHERE op = 4) AS atomics,
           count(*) FILTER (WHERE op = 5) AS acks,
           count(*) FILTER (WHERE op = 6) AS atomic_acks,
           count(*) FILTER (WHERE op = 7) AS cnps,
           count(*) FILTER (WHERE op = 8) AS other_ops,
           count(*) FILTER (WHERE syndrome >> 5 = 3) AS naks,
           count(*) FILTER (WHERE syndrome >> 5 = 1) AS rnr_naks,
           count(*) FILTER (WHERE ecn = 3) AS ecn_ce,
           min(psn) AS psn_min,
           max(psn) AS psn_max,
           arg_min(psn, ts_ns::HUGEINT * 16777216 + psn) AS psn_first,
           arg_max(psn, ts_ns::HUGEINT * 16777216 + psn) AS psn_last,
           min(ts_ns) AS first_ns,
           max(ts_ns) AS last_ns,
           -- one value or NULL, without DISTINCT aggregates: min = max over every row that counts
           CASE WHEN min(src_port) FILTER (WHERE op <> 7) = max(src_port) FILTER (WHERE op <> 7)
                     AND count(src_port) FILTER (WHERE op <> 7) = count(*) FILTER (WHERE op <> 7)
                THEN min(src_port) FILTER (WHERE op <> 7) END AS src_port,
           CASE WHEN min(deth_src_qp) = max(deth_src_qp) THEN min(deth_src_qp) END AS deth_src_qp,
           CASE
               WHEN count(*) FILTER (WHERE op <> 7) = 0 THEN 'CNP'
               WHEN min(opcode) FILTER (WHERE op <> 7) >= 128 THEN 'other'
               WHEN max(opcode) FILTER (WHERE op <> 7) >= 128
                    OR min(opcode >> 5) FILTER (WHERE op <> 7) <> max(opcode >> 5) FILTER (WHERE op <> 7)
                   THEN 'mixed'
               ELSE ['RC', 'UC', 'RD', 'UD'][min(opcode >> 5) FILTER (WHERE op <> 7) + 1]
           END AS transport
    FROM roce
    GROUP BY flow
),
ported AS (  -- flows that can be paired: an address pair and one UDP source port, one flow each way
    SELECT run, src_ip, dst_ip, src_port, dest_qp,
           count(*) OVER (PARTITION BY run, src_ip, dst_ip, src_port) AS alike
    FROM flows
    WHERE src_port IS NOT NULL AND src_ip IS NOT NULL AND dst_ip IS NOT NULL
)
SELECT
    f.run,
    s.worker AS src_worker,
    d.worker AS dst_worker,
    f.src_ip,
    f.dst_ip,
    f.dest_qp,
    coalesce(f.deth_src_qp, r.dest_qp) AS src_qp,
    r.dest_qp IS NOT NULL AS paired,
    f.src_port,
    f.transport,
    f.packets, f.bytes, f.message_bytes, f.reth_dma_bytes, f.messages,
    f.sends, f.writes, f.read_requests, f.read_responses, f.atomics, f.acks, f.atomic_acks, f.cnps, f.other_ops,
    f.naks, f.rnr_naks, f.ecn_ce,
    f.psn_min, f.psn_max, f.psn_first, f.psn_last,
    coalesce(q.gaps, 0)::BIGINT AS psn_gaps,
    coalesce(q.skipped, 0)::BIGINT AS psn_skipped,
    coalesce(q.repeats, 0)::BIGINT AS psn_repeats,
    coalesce(q.rewinds, 0)::BIGINT AS psn_rewinds,
    f.first_ns,
    f.last_ns
FROM flows AS f
LEFT JOIN ported AS o
    ON o.run = f.run AND o.src_ip = f.src_ip AND o.dst_ip = f.dst_ip AND o.src_port = f.src_port AND o.alike = 1
LEFT JOIN ported AS r
    ON o.run IS NOT NULL AND r.run = f.run AND r.src_ip = f.dst_ip AND r.dst_ip = f.src_ip
    AND r.src_port = f.src_port AND r.alike = 1
LEFT JOIN (
    SELECT flow, sum(gaps) AS gaps, sum(skipped) AS skipped, sum(repeats) AS repeats, sum(rewinds) AS rewinds
    FROM sequences
    GROUP BY flow
) AS q ON q.flow = f.flow
LEFT JOIN workers AS s ON s.run = f.run AND s.ip = f.src_ip
LEFT JOIN workers AS d ON d.run = f.run AND d.ip = f.dst_ip
ORDER BY f.run, src_worker NULLS LAST, dst_worker NULLS LAST, f.src_ip NULLS LAST, f.dst_ip NULLS LAST, f.dest_qp;

CREATE OR REPLACE VIEW rdma_flows AS SELECT * FROM rdma_flows();
