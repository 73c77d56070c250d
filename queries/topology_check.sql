-- Measured flow matrix next to the one predicted for the run's collective and topology.
-- Kind: answer
-- Key: run, src_worker, dst_worker
-- Headline: predicted, measured_share, predicted_share, per_step_ratio
-- Partition: run
--
-- Prediction (gradient bytes M per step, N workers; rank r = worker W(r+1), ranks in address order):
--   nccl_ring    NCCL's own rings, from its logs (nccl_edges, kind ring): each rank sends to the next
--                rank of its `Ring` line, ranks on workers as the logs say (nccl_rank_workers)
--   nccl_tree    NCCL's own trees, from its logs (nccl_edges, kind tree): both directions of every
--                tree link, M per direction per link
--   ring_next    ring all-reduce sending to rank i+1 (TensorFlow RING, Open MPI, NCCL without its
--                logs, KungFu RING)
--   ring_prev    ring all-reduce sending to rank i−1 (gloo: Horovod gloo, PyTorch DDP gloo)
--                each ring edge carries 2(N−1)/N · M per step
--   star         parameter-server-like star at rank 0 (KungFu STAR, and TREE with one peer per host):
--                0→j and j→0 carry M each
--   binary_tree  i ↔ 2i+1, 2i+2 (KungFu BINARY_TREE, BINARY_TREE_STAR): M per direction per edge
--   clique       every ordered pair ≈ 2M/N (KungFu CLIQUE, MULTI_STAR)
-- Every pattern moves 2(N−1)·M per step in total, so the predicted share of an edge is 1/#edges.
-- The pattern comes from run_meta.topology (ring, star, tree, binary_tree[_star], clique,
-- multi_star; case-insensitive) and, for rings, from backend: gloo without nccl → ring_prev. A run
-- with NCCL logs that declare rings (trees) gets nccl_ring for topology ring (nccl_tree for tree).
-- Unknown topologies get pattern NULL and no prediction.
-- Measured bytes are transport payload (ACKs carry none, so the reverse ring direction reads ≈ 0;
-- NCCL's clear-to-send writes there are a few bytes per message): TCP/UDP payload (l4_payload_len),
-- and for RoCE packets the RDMA payload (rdma_payload_len, so RDMA ACKs, READ requests and CNPs carry
-- none either, and BTH, extension headers and ICRC are not counted as payload), over the training
-- window (first, last logged step] when the run has a training log, else the whole run; only
-- worker-to-worker traffic counts toward the shares. nccl_topology compares NCCL's declared graph
-- with the measured one edge by edge and QP by QP.
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns:
--   run, topology, backend, pattern, n_workers
--   src_worker, dst_worker   every ordered pair of distinct workers
--   predicted                true where the pattern puts gradient traffic
--   bytes, payload_bytes     measured frame and payload bytes (RDMA payload for RoCE) on the pair, bytes
--   measured_share           payload_bytes / all worker-to-worker payload of the run
--   predicted_share          1/#edges on predicted pairs, 0 elsewhere; NULL when pattern is NULL
--   share_deviation          measured_share − predicted_share
--   steps                    whole steps in the training window; NULL without a training log
--   payload_per_step         payload_bytes / steps, bytes
--   predicted_per_step       2(N−1)·grad_bytes/#edges on predicted pairs, 0 elsewhere; NULL if unknown
--   per_step_ratio           payload_per_step / predicted_per_step (predicted pairs only)
CREATE OR REPLACE MACRO topology_check(runs := NULL) AS TABLE
WITH
declared AS (
    SELECT run, src_worker, dst_worker, bool_or(kind = 'ring') AS ring, bool_or(kind = 'tree') AS tree
    FROM nccl_edges
    WHERE src_worker IS NOT NULL AND dst_worker IS NOT NULL AND kind IN ('ring', 'tree')
    GROUP BY run, src_worker, dst_worker
),
nccl AS (
    SELECT run, bool_or(ring) AS has_ring, bool_or(tree) AS has_tree FROM declared GROUP BY run
),
meta AS (
    SELECT r.run, r.topology, r.backend, r.grad_bytes,
           CASE
               WHEN lower(r.topology) = 'ring' AND n.has_ring THEN 'nccl_ring'
               WHEN lower(r.topology) = 'tree' AND n.has_tree THEN 'nccl_tree'
               WHEN lower(topology) = 'ring' AND lower(backend) LIKE '%gloo%' AND lower(backend) NOT LIKE '%nccl%'
                   THEN 'ring_prev'
               WHEN lower(topology) = 'ring' THEN 'ring_next'
               WHEN lower(topology) IN ('star', 'tree') THEN 'star'
               WHEN lower(topology) IN ('binary_tree', 'binary_tree_star') THEN 'binary_tree'
               WHEN lower(topology) IN ('clique', 'multi_star') THEN 'clique'
           END AS pattern
    FROM run_meta AS r
    LEFT JOIN nccl AS n ON n.run = r.run
    WHERE runs IS NULL OR list_contains(runs, r.run)
),
ranked AS (
    SELECT run, worker, ip, try_cast(substr(worker, 2) AS INTEGER) - 1 AS rank,
           count(*) OVER (PARTITION BY run) AS n
    FROM workers
    WHERE runs IS NULL OR list_contains(runs, run)
),
pairs AS (
    SELECT s.run, s.n, s.worker AS src_worker, d.worker AS dst_worker, s.ip AS src_ip, d.ip AS dst_ip,
           m.topology, m.backend, m.pattern, m.grad_bytes,
           CASE m.pattern
               WHEN 'nccl_ring' THEN coalesce(nd.ring, false)
               WHEN 'nccl_tree' THEN coalesce(nd.tree, false)
               WHEN 'ring_next' THEN d.rank = (s.rank + 1) % s.n
               WHEN 'ring_prev' THEN d.rank = (s.rank + s.n - 1) % s.n
               WHEN 'star' THEN s.rank = 0 OR d.rank = 0
               WHEN 'binary_tree' THEN d.rank IN (2 * s.rank + 1, 2 * s.rank + 2) OR s.rank IN (2 * d.rank + 1, 2 * d.rank + 2)
               WHEN 'clique' THEN true
           END AS predicted
    FROM ranked AS s
    JOIN ranked AS d ON d.run = s.run AND d.worker <> s.worker
    JOIN meta AS m ON m.run = s.run
    LEFT JOIN declared AS nd ON nd.run = s.run AND nd.src_worker = s.worker AND nd.dst_worker = d.worker
),
lw AS (SELECT * FROM train_window(runs := runs)),
measured AS (
    SELECT p.run, p.src_ip, p.dst_ip, sum(p.frame_len)::BIGINT AS bytes,
           coalesce(sum(coalesce(p.rdma_payload_len, p.l4_payload_len)), 0)::BIGINT AS payload_bytes
    FROM packets AS p
    LEFT JOIN lw ON lw.run = p.run
    WHERE (runs IS NULL OR list_contains(runs, p.run))
        AND (lw.run IS NULL OR (p.ts_ns > lw.t_first AND p.ts_ns <= lw.t_last))
        AND p.src_ip IS NOT NULL AND p.dst_ip IS NOT NULL
    GROUP BY p.run, p.src_ip, p.dst_ip
),
joined AS (
    SELECT pr.*, coalesce(ms.bytes, 0) AS bytes, coalesce(ms.payload_bytes, 0) AS payload_bytes, lw.steps,
           count(*) FILTER (WHERE pr.predicted) OVER (PARTITION BY pr.run) AS edges,
           sum(coalesce(ms.payload_bytes, 0)) OVER (PARTITION BY pr.run) AS run_payload
    FROM pairs AS pr
    LEFT JOIN measured AS ms ON ms.run = pr.run AND ms.src_ip = pr.src_ip AND ms.dst_ip = pr.dst_ip
    LEFT JOIN lw ON lw.run = pr.run
)
SELECT
    run, topology, backend, pattern, n AS n_workers, src_worker, dst_worker, predicted,
    bytes::BIGINT AS bytes,
    payload_bytes::BIGINT AS payload_bytes,
    payload_bytes / nullif(run_payload, 0) AS measured_share,
    CASE WHEN pattern IS NULL THEN NULL WHEN predicted THEN 1.0 / edges ELSE 0.0 END AS predicted_share,
    payload_bytes / nullif(run_payload, 0)
        - CASE WHEN pattern IS NULL THEN NULL WHEN predicted THEN 1.0 / edges ELSE 0.0 END AS share_deviation,
    steps,
    payload_bytes / steps AS payload_per_step,
    CASE WHEN pattern IS NULL THEN NULL WHEN predicted THEN 2.0 * (n - 1) * grad_bytes / edges ELSE 0.0 END
        AS predicted_per_step,
    CASE WHEN predicted THEN (payload_bytes / steps) / (2.0 * (n - 1) * grad_bytes / edges) END AS per_step_ratio
FROM joined
ORDER BY run, src_worker, dst_worker;

CREATE OR REPLACE VIEW topology_check AS SELECT * FROM topology_check();
