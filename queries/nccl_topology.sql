-- NCCL's declared communication graph beside the one measured on the wire, edge by edge and QP by QP.
-- Kind: answer
-- Partition: run
--
-- Runs with NCCL logs only (table nccl_ranks). Declared edges come from nccl_edges (ranks on workers
-- via nccl_rank_workers). A measured edge is a directed worker pair with RDMA data: an RC/UC flow
-- (source, destination, destination QP) that completes messages at the receiver (a SEND or a
-- RDMA WRITE with immediate). NCCL ends every data transfer with a WRITE with immediate; its
-- receiver's clear-to-send notices are plain RDMA WRITEs on the reverse direction and ACKs carry
-- nothing, so neither makes an edge. Its bytes are the RDMA payload of the flow's SEND/WRITE frames.
--
-- The declared graph compared is that of the run's algorithm: the run's topology when it is `ring`
-- or `tree`, else whichever of ring, tree or both differs least from what was measured (`algorithm`).
-- An edge contradicts when it is declared for that algorithm and carries no data, when it carries
-- data and is not declared, or when its data flows on QPs the sender's log does not name. `verdict`
-- (per run) is true when the measured graph equals the declared one, every QP agrees and every
-- rank's log lies beside its own worker's capture; false on any contradiction (a log whose
-- addresses are another worker's counts: see nccl_rank_workers.pairing); NULL when the capture holds
-- no RDMA data (a host-side tcpdump does not see RoCE) or some declared rank has no captured worker.
-- NET/Socket, P2P and SHM transports are declared here but not measured (their data is TCP or never
-- leaves the host).
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
--   measured                 RDMA data flows on the pair
--   data_bytes, data_frames  their SEND/WRITE payload, bytes, and frames; NULL when not measured
--   measured_qps             their destination QPs, ascending
--   qp_agrees                every measured QP is a declared one; NULL when either side is unknown
--   status                   'declared and measured' | 'declared, no data on the wire' |
--                            'data on the wire, not declared' | 'data on QPs the log does not declare' |
--                            'set up, idle' | 'rank without a captured worker'
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
measured AS (
    SELECT wp.run, wp.src_worker, wp.dst_worker, sum(f.payload)::BIGINT AS data_bytes,
           sum(f.frames)::BIGINT AS data_frames, list(f.qp::BIGINT ORDER BY f.qp) AS measured_qps
    FROM flows AS f
    JOIN worker_pairs AS wp ON wp.pair = f.pair
    JOIN nruns ON nruns.run = wp.run
    WHERE f.completes
    GROUP BY wp.run, wp.src_worker, wp.dst_worker
),
edges AS (
    SELECT coalesce(d.run, m.run) AS run,
           coalesce(d.src_worker, m.src_worker) AS src_worker,
           coalesce(d.dst_worker, m.dst_worker) AS dst_worker,
           coalesce(sr.rank, d.src_rank) AS src_rank, coalesce(dr.rank, d.dst_rank) AS dst_rank,
           coalesce(d.ring, false) AS ring, coalesce(d.tree, false) AS tree,
           coalesce(d.connection, false) AS connection, d.transport,
           CASE WHEN len(d.declared_qps) > 0 THEN d.declared_qps END AS declared_qps,
           m.run IS NOT NULL AS measured, m.data_bytes, m.data_frames, m.measured_qps
    FROM declared AS d
    FULL JOIN measured AS m
        ON m.run = d.run AND m.src_worker = d.src_worker AND m.dst_worker = d.dst_worker
    LEFT JOIN rank_of AS sr ON sr.run = coalesce(d.run, m.run) AND sr.worker = coalesce(d.src_worker, m.src_worker)
    LEFT JOIN rank_of AS dr ON dr.run = coalesce(d.run, m.run) AND dr.worker = coalesce(d.dst_worker, m.dst_worker)
),
fit AS (
    SELECT e.run, lower(any_value(rm.topology)) AS topology,
           count(*) FILTER (WHERE e.measured) AS n_measured,
           count(*) FILTER (WHERE e.ring <> e.measured) AS ring_miss,
           count(*) FILTER (WHERE e.tree <> e.measured) AS tree_miss,
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
               WHEN measured THEN 'data on the wire, not declared'
               ELSE 'set up, idle'
           END AS status,
           CASE
               WHEN n_measured = 0 OR src_worker IS NULL OR dst_worker IS NULL THEN NULL
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
       v.declared_qps, v.measured, v.data_bytes, v.data_frames, v.measured_qps, v.qp_agrees,
       v.status, v.contradicts, p.rank_problems
FROM verdicts AS v
LEFT JOIN pairings AS p ON p.run = v.run
ORDER BY v.run, v.src_worker NULLS LAST, v.dst_worker NULLS LAST, v.src_rank, v.dst_rank;

CREATE OR REPLACE VIEW nccl_topology AS SELECT * FROM nccl_topology();
