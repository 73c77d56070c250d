-- NCCL's declared communication graph beside the one measured on the wire, edge by edge and QP by QP.
-- Kind: answer
-- Key: run, src_worker, dst_worker
-- Headline: status, data_bytes, contradicts, verdict
-- Needs: nccl log
-- Partition: run
--
-- Runs with NCCL logs only (table nccl_ranks). Declared edges come from nccl_edges (ranks on workers
-- via nccl_rank_workers). A measured edge is a directed worker pair (its workers' addresses, as in
-- worker_pairs) with NCCL data on the wire, of either transport:
--   NET/IB      an RC/UC flow (source, destination, destination QP) that completes messages at the
--               receiver (a SEND or a RDMA WRITE with immediate). NCCL ends every data transfer with
--               a WRITE with immediate; its receiver's clear-to-send notices are plain RDMA WRITEs on
--               the reverse direction and ACKs carry nothing, so neither makes an edge. Its bytes
--               are the RDMA payload of the flow's SEND/WRITE frames.
--   NET/Socket  a TCP connection NCCL's socket transport opened from the sender to the receiver
--               (one per channel and peer, or NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS data
--               sockets plus a control socket), told from the bootstrap's and the launcher's
--               connections between the same addresses by how it opens: the side that sent the
--               SYN sends NCCL's 8-byte magic, 4-byte socket type and 1-byte socket index as its
--               first three payload segments (NCCL ≥ 2.16; the bootstrap follows the type with a
--               4-byte size, PyTorch's TCPStore opens otherwise). Its bytes and frames are
--               the TCP payload after that 13-byte opening, and the frames that carry it; a
--               connection with nothing after it (a set-up, unused one) carries no data. A
--               connection whose opening the capture missed is not counted.
--
-- The declared graph compared is that of the run's algorithm: the run's topology when it is `ring`
-- or `tree`, else whichever of ring, tree or both differs least from what was measured (`algorithm`).
-- An edge contradicts when it is declared for that algorithm and carries no data, when it carries
-- data and is not declared, or when its data flows on QPs the sender's log does not name. NCCL
-- picks an algorithm per collective (the tree for small all-reduces unless NCCL_ALGO pins one), so
-- an edge NCCL declared for its other algorithm (ring or tree) that carries under 1 % of the run's
-- measured data does not contradict (the 4-rank socket run: 40 bytes on each of four tree links,
-- its 1-element all-reduce); with more it does. `verdict` (per run) is true when the measured graph
-- equals the declared one, every QP agrees and every rank's log lies beside its own worker's
-- capture; false on any contradiction (a log whose addresses are another worker's counts: see
-- nccl_rank_workers.pairing); NULL when nothing NCCL sent is on the wire (no RDMA data: a host-side
-- tcpdump does not see RoCE; no NCCL data socket: NCCL before 2.16 opens its sockets otherwise) or
-- some declared rank has no captured worker. P2P and SHM transports are declared here but not
-- measured (their data never leaves the host).
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns:
--   run
--   algorithm                'ring' | 'tree' | 'ring+tree': whose declared edges the run is held to
--   verdict                  per run: the measured graph equals the declared one, QPs and log
--                            placement agree; NULL without RDMA data or with an unpaired rank
--   src_worker, dst_worker   the directed pair; NULL for a declared rank without a captured worker
--   src_rank, dst_rank       the workers' lowest ranks in their largest communicator (else the
--                            declared rank); edges between ranks of one worker are left out
--   ring, tree, connection   what NCCL declared on the pair (see nccl_edges)
--   transport                transports NCCL set up for the pair, comma-separated
--   declared_qps             destination QPs the sender logged for the pair
--   measured                 NCCL data on the pair (RDMA flows or socket connections, above)
--   data_bytes, data_frames  their data: RDMA SEND/WRITE payload and TCP payload after the sockets'
--                            opening, bytes, and the frames carrying it; NULL when not measured
--   flows                    RDMA flows (destination QPs) and TCP connections carrying that data
--   measured_qps             their destination QPs, ascending
--   qp_agrees                every measured QP is a declared one; NULL when either side is unknown
--   status                   'declared and measured' | 'declared, no data on the wire' |
--                            'data on the wire, not declared' | 'data on QPs the log does not declare' |
--                            'little data on a link of the other algorithm' | 'set up, idle' |
--                            'rank without a captured worker'
--   contradicts              the edge contradicts the log; NULL when it cannot be told
--   rank_problems            per run: logs not paired with their worker's capture, '; '-separated
CREATE OR REPLACE MACRO nccl_topology(runs := NULL) AS TABLE
WITH
nruns AS (
    SELECT DISTINCT run FROM nccl_ranks WHERE runs IS NULL OR list_contains(runs, run)
),
rank_of AS (
    -- a worker's lowest rank in its largest communicator (a multi-GPU host holds several ranks)
    SELECT run, worker, min(rank) AS rank
    FROM (
        SELECT run, worker, rank, nranks, max(nranks) OVER (PARTITION BY run, worker) AS top
        FROM nccl_rank_workers
        WHERE worker IS NOT NULL
    )
    WHERE nranks = top
    GROUP BY run, worker
),
declared AS (
    SELECT e.run, e.src_worker, e.dst_worker,
           min(e.src_rank) AS src_rank, min(e.dst_rank) AS dst_rank,
           bool_or(e.kind = 'ring') AS ring, bool_or(e.kind = 'tree') AS tree,
           bool_or(e.kind = 'connection') AS connection,
           string_agg(DISTINCT e.transport, ',' ORDER BY e.transport) AS transport,
           list_sort(list_distinct(flatten(list(e.qps) FILTER (WHERE e.qps IS NOT NULL)))) AS declared_qps
    FROM nccl_edges AS e
    JOIN nruns USING (run)
    WHERE e.src_worker IS NULL OR e.dst_worker IS NULL OR e.src_worker <> e.dst_worker  -- else within a host
    GROUP BY e.run, e.src_worker, e.dst_worker,
             CASE WHEN e.src_worker IS NULL THEN e.src_rank END,
             CASE WHEN e.dst_worker IS NULL THEN e.dst_rank END
),
flows AS (
    -- one group per run, address pair (the key of worker_pairs) and destination QP
    SELECT xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2) AS pair, rdma_dest_qp AS qp,
           bool_or(rdma_opcode < 64 AND (rdma_opcode & 31) IN (2, 3, 4, 5, 9, 11)) AS completes,
           sum(rdma_payload_len) FILTER (WHERE rdma_opcode < 64 AND (rdma_opcode & 31) <= 11) AS payload,
           count(*) FILTER (WHERE rdma_opcode < 64 AND (rdma_opcode & 31) <= 11) AS frames
    FROM packets_window(runs := runs)
    WHERE rdma_opcode IS NOT NULL AND rdma_dest_qp IS NOT NULL
    GROUP BY pair, qp
),
rdma AS (
    SELECT wp.run, wp.src_worker, wp.dst_worker, sum(f.payload)::BIGINT AS data_bytes,
           sum(f.frames)::BIGINT AS data_frames, count(*) AS flows,
           list(f.qp::BIGINT ORDER BY f.qp) AS measured_qps
    FROM flows AS f
    JOIN worker_pairs AS wp ON wp.pair = f.pair
    JOIN nruns ON nruns.run = wp.run
    WHERE f.completes
    GROUP BY wp.run, wp.src_worker, wp.dst_worker
),
socket_runs AS (
    SELECT DISTINCT c.run FROM nccl_channels AS c JOIN nruns USING (run) WHERE c.transport = 'NET/Socket'
),
connections AS (
    -- one group per run, address pair (the key of worker_pairs) and port pair: one direction of a
    -- TCP connection, with the sizes of its first three payload segments (in time order; sorted,
    -- so segments stamped alike still compare)
    SELECT xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2) AS pair,
           bool_or(tcp_flags & 18 = 2) AS opened,  -- a SYN without ACK: this side opened it
           list_sort(arg_min(l4_payload_len, ts_ns, 3) FILTER (WHERE l4_payload_len > 0)) AS opening,
           sum(l4_payload_len) AS payload,
           count(*) FILTER (WHERE l4_payload_len > 0) AS frames
    FROM packets_window(runs := runs)
    WHERE ip_proto = 6 AND run IN (SELECT run FROM socket_runs)
    GROUP BY pair, src_port, dst_port
),
sockets AS (
    SELECT wp.run, wp.src_worker, wp.dst_worker, sum(c.payload - 13)::BIGINT AS data_bytes,
           sum(c.frames - 3)::BIGINT AS data_frames, count(*) AS flows
    FROM connections AS c
    JOIN worker_pairs AS wp ON wp.pair = c.pair
    WHERE c.opened AND c.opening = [1, 4, 8] AND c.payload > 13
    GROUP BY wp.run, wp.src_worker, wp.dst_worker
),
measured AS (
    SELECT coalesce(r.run, s.run) AS run,
           coalesce(r.src_worker, s.src_worker) AS src_worker,
           coalesce(r.dst_worker, s.dst_worker) AS dst_worker,
           coalesce(r.data_bytes, 0) + coalesce(s.data_bytes, 0) AS data_bytes,
           coalesce(r.data_frames, 0) + coalesce(s.data_frames, 0) AS data_frames,
           coalesce(r.flows, 0) + coalesce(s.flows, 0) AS flows,
           r.measured_qps
    FROM rdma AS r
    FULL JOIN sockets AS s ON s.run = r.run AND s.src_worker = r.src_worker AND s.dst_worker = r.dst_worker
),
edges AS (
    SELECT coalesce(d.run, m.run) AS run,
           coalesce(d.src_worker, m.src_worker) AS src_worker,
           coalesce(d.dst_worker, m.dst_worker) AS dst_worker,
           coalesce(sr.rank, d.src_rank) AS src_rank, coalesce(dr.rank, d.dst_rank) AS dst_rank,
           coalesce(d.ring, false) AS ring, coalesce(d.tree, false) AS tree,
           coalesce(d.connection, false) AS connection, d.transport,
           CASE WHEN len(d.declared_qps) > 0 THEN d.declared_qps END AS declared_qps,
           m.run IS NOT NULL AS measured, m.data_bytes, m.data_frames, m.flows, m.measured_qps,
           -- NCCL declared the pair for an algorithm, and it carries under 1 % of the run's data
           m.run IS NOT NULL AND coalesce(d.ring OR d.tree, false)
               AND m.data_bytes * 100 < sum(m.data_bytes) OVER (PARTITION BY coalesce(d.run, m.run)) AS little
    FROM declared AS d
    FULL JOIN measured AS m
        ON m.run = d.run AND m.src_worker = d.src_worker AND m.dst_worker = d.dst_worker
    LEFT JOIN rank_of AS sr ON sr.run = coalesce(d.run, m.run) AND sr.worker = coalesce(d.src_worker, m.src_worker)
    LEFT JOIN rank_of AS dr ON dr.run = coalesce(d.run, m.run) AND dr.worker = coalesce(d.dst_worker, m.dst_worker)
),
fit AS (
    SELECT e.run, lower(any_value(rm.topology)) AS topology,
           count(*) FILTER (WHERE e.measured) AS n_measured,
           count(*) FILTER (WHERE e.ring <> e.measured AND NOT (e.little AND NOT e.ring)) AS ring_miss,
           count(*) FILTER (WHERE e.tree <> e.measured AND NOT (e.little AND NOT e.tree)) AS tree_miss,
           count(*) FILTER (WHERE (e.ring OR e.tree) <> e.measured) AS both_miss
    FROM edges AS e
    LEFT JOIN run_meta AS rm ON rm.run = e.run
    GROUP BY e.run
),
algo AS (
    SELECT run, n_measured,
           CASE
               WHEN topology IN ('ring', 'tree') THEN topology
               WHEN ring_miss <= tree_miss AND ring_miss <= both_miss THEN 'ring'
               WHEN tree_miss <= both_miss THEN 'tree'
               ELSE 'ring+tree'
           END AS algorithm
    FROM fit
),
pairings AS (
    SELECT run,
           bool_or(pairing = 'contradicts') AS misplaced,
           string_agg(
               CASE WHEN pairing = 'contradicts' THEN
                   'rank ' || rank || ' (' || file || ') lies beside ' || name_worker
                   || '''s capture, but its address ' || address || ' is ' || address_worker || '''s'
               END, '; ' ORDER BY rank, file) AS rank_problems
    FROM nccl_rank_workers
    GROUP BY run
),
judged AS (
    SELECT e.*, a.algorithm, a.n_measured,
           CASE a.algorithm WHEN 'ring' THEN e.ring WHEN 'tree' THEN e.tree ELSE e.ring OR e.tree END
               AS expected,
           CASE WHEN e.measured AND e.declared_qps IS NOT NULL
               THEN list_has_all(e.declared_qps, e.measured_qps) END AS qp_agrees
    FROM edges AS e
    JOIN algo AS a ON a.run = e.run
),
verdicts AS (
    SELECT *,
           CASE
               WHEN src_worker IS NULL OR dst_worker IS NULL THEN 'rank without a captured worker'
               WHEN expected AND measured AND qp_agrees IS NOT DISTINCT FROM false
                   THEN 'data on QPs the log does not declare'
               WHEN expected AND measured THEN 'declared and measured'
               WHEN expected THEN 'declared, no data on the wire'
               WHEN little AND qp_agrees IS DISTINCT FROM false
                   THEN 'little data on a link of the other algorithm'
               WHEN measured THEN 'data on the wire, not declared'
               ELSE 'set up, idle'
           END AS status,
           CASE
               WHEN n_measured = 0 OR src_worker IS NULL OR dst_worker IS NULL THEN NULL
               WHEN NOT expected AND little THEN qp_agrees IS NOT DISTINCT FROM false
               ELSE expected <> measured OR qp_agrees IS NOT DISTINCT FROM false
           END AS contradicts
    FROM judged
)
SELECT v.run, v.algorithm,
       CASE
           WHEN coalesce(p.misplaced, false) OR bool_or(v.contradicts) OVER (PARTITION BY v.run) THEN false
           WHEN v.n_measured = 0 OR bool_or(v.contradicts IS NULL) OVER (PARTITION BY v.run) THEN NULL
           ELSE true
       END AS verdict,
       v.src_worker, v.dst_worker, v.src_rank, v.dst_rank, v.ring, v.tree, v.connection, v.transport,
       v.declared_qps, v.measured, v.data_bytes, v.data_frames, v.flows, v.measured_qps, v.qp_agrees,
       v.status, v.contradicts, p.rank_problems
FROM verdicts AS v
LEFT JOIN pairings AS p ON p.run = v.run
ORDER BY v.run, v.src_worker NULLS LAST, v.dst_worker NULLS LAST, v.src_rank, v.dst_rank;

CREATE OR REPLACE VIEW nccl_topology AS SELECT * FROM nccl_topology();
