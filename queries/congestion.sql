-- ECN-CE marks and CNPs per directed worker link and time bin, beside its bytes: DCQCN at work.
-- Kind: answer
-- Key: run, src_worker, dst_worker, t_s
-- Headline: gbps, ecn_ce, cnps
-- Partition: run
--
-- Semantics: `link_util`'s series (one per directed worker pair with traffic; contiguous, zero-filled
-- bins aligned to multiples of bin_ns since the Unix epoch; bytes are frame_len), each bin with the
-- congestion signals that crossed the link in it: packets whose IP header says ECN Congestion
-- Experienced (ecn = 3: a switch queue marked them on the way) and RoCEv2 CNPs (BTH opcode 0x81).
-- Under DCQCN a receiver that gets CE-marked packets sends CNPs back to their sender's QP, and the
-- sender cuts its rate: CE marks on W1→W2 come with CNPs on W2→W1 and, soon after, fewer bytes on
-- W1→W2. Signals between a worker and a non-worker (a switch's own CNPs, for one) are not shown, as
-- link_util shows no such traffic; per-flow counts are in `rdma_flows`.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms; 100 000 = 100 µs works)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run, src_worker, dst_worker   directed pair (worker labels W1..Wn); only pairs with ≥ 1 packet
--                                 between two workers in the window appear
--   bin_start_ns                  bin start, UTC ns (a multiple of bin_ns)
--   bin_ns                        bin width, ns
--   t_s                           bin start, seconds after the run's first packet
--   bytes                         sum of frame_len, bytes (L2 frames, headers included)
--   gbps                          bytes·8 / bin_ns, Gbit/s
--   ecn_ce                        packets marked ECN-CE in the bin
--   cnps                          CNP packets in the bin
CREATE OR REPLACE MACRO congestion(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH marks AS (
    -- the same integer keys as link_series (run and address pair hashed, see worker_pairs; bin index),
    -- over the few marked packets only
    SELECT xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2) AS pair, ts_ns // bin_ns::BIGINT AS k,
           count(*) FILTER (WHERE ecn = 3) AS ecn_ce, count(*) FILTER (WHERE rdma_opcode = 129) AS cnps
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE ecn = 3 OR rdma_opcode = 129
    GROUP BY pair, k
),
labelled AS (
    SELECT wp.run, wp.src_worker, wp.dst_worker, m.k * bin_ns::BIGINT AS bin_start_ns, m.ecn_ce, m.cnps
    FROM marks AS m
    JOIN worker_pairs AS wp ON wp.pair = m.pair
)
SELECT l.run, l.src_worker, l.dst_worker, l.bin_start_ns, l.bin_ns, l.t_s, l.bytes, l.gbps,
       coalesce(m.ecn_ce, 0) AS ecn_ce, coalesce(m.cnps, 0) AS cnps
FROM link_series(bin_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := true) AS l
LEFT JOIN labelled AS m
    ON m.run = l.run AND m.src_worker = l.src_worker AND m.dst_worker = l.dst_worker
    AND m.bin_start_ns = l.bin_start_ns
ORDER BY l.run, l.src_worker, l.dst_worker, l.bin_start_ns;

CREATE OR REPLACE VIEW congestion AS SELECT * FROM congestion();
