-- The bytes each recorded collective's algorithm puts on each directed worker link, rank by rank.
-- Kind: building block
-- Partition: run
--
-- For each collective of collective_calls (one sending rank) the ranks it sends to and how much, for a
-- message of S bytes (NCCL's count × element size) on a communicator of N ranks:
--   ring (NCCL's default; gloo's ring)   the rank sends to its ring neighbour
--       all_reduce      2(N−1)/N · S        reduce-scatter then all-gather of S/N chunks
--       all_gather      (N−1) · S           each rank's S travels N−1 hops
--       reduce_scatter  (N−1) · S           S is each rank's output
--       broadcast       S, unless the neighbour is the root (the chain ends there)
--       reduce          S, unless this rank is the root (the chain ends there)
--   tree (algorithm TREE, with NCCL's trees logged)
--       all_reduce      S · share to its parent (reduce) and to each child (broadcast)
--   send                S to its peer
-- The neighbour: NCCL's declared ring of the collective's communicator (nccl_rings, each channel's
-- next rank; a rank whose channels name several neighbours splits S among them by channel count),
-- else rank order: rank r sends to r+1 (NCCL, MPI), or to r−1 for gloo, which passes its ring to the
-- left (see topology_check) — mod N either way. The algorithm is the source's (NCCL's plugins) or
-- RING. For broadcast and reduce the root is the source's, else rank 0. Operations without a
-- model here (all_to_all, barrier, gather, scatter, recv) have no rows. The destination rank gets its
-- worker from the same source's rows of that rank, else as collective_calls pairs ranks (NCCL log of
-- the rank, capture `worker-<rank>-…`).
--
-- Parameters: none.
-- Columns:
--   run, source, comm, seq, op, bytes, step, algorithm   the collective (algorithm as modelled)
--   file                     the sending rank's source file
--   n_ranks                  N: the communicator's size (collective_calls.n_ranks)
--   src_rank, dst_rank       sending and receiving rank
--   src_worker, dst_worker   their workers; NULL when unknown
--   start_ns, end_ns         the sending rank's own start and end of the collective, UTC ns
--   clock_offset_ns          the sending rank's host clock − the runner's, ns (NULL: unknown, 0)
--   instance_start_ns, instance_end_ns   the instance's earliest start and latest end on the
--                            runner's clock (collective_calls), UTC ns
--   instance_ranks           ranks of the source that recorded the instance
--   predicted_bytes          bytes the model puts on src → dst, bytes (fractional for split shares)
--   neighbours               'nccl' (declared) | 'rank order'
CREATE OR REPLACE VIEW collective_links AS
WITH
calls AS (
    SELECT c.*, c.n_ranks AS n,
           upper(coalesce(c.algorithm, 'RING')) AS algo,
           CASE WHEN c.op IN ('broadcast', 'reduce') THEN coalesce(c.peer, 0) END AS root,
           coalesce(c.backend = 'gloo', false) AS gloo
    FROM collective_calls AS c
    WHERE c.rank IS NOT NULL AND c.bytes IS NOT NULL
),
ring AS (
    SELECT run, comm_id, rank, next_rank AS dst_rank,
           count(*) / sum(count(*)) OVER (PARTITION BY run, comm_id, rank) AS share
    FROM (SELECT DISTINCT run, comm_id, channel, rank, next_rank FROM nccl_rings
          WHERE next_rank >= 0 AND next_rank <> rank)
    GROUP BY run, comm_id, rank, next_rank
),
tree_edges AS (
    SELECT DISTINCT run, comm_id, channel, rank, up_rank AS dst_rank FROM nccl_trees WHERE up_rank >= 0
    UNION
    SELECT DISTINCT run, comm_id, channel, rank, unnest(down_ranks) FROM nccl_trees
),
tree AS (
    SELECT e.run, e.comm_id, e.rank, e.dst_rank, count(*) / any_value(n.channels) AS share
    FROM tree_edges AS e
    JOIN (SELECT run, comm_id, rank, count(DISTINCT channel) AS channels FROM nccl_trees GROUP BY ALL) AS n
        ON n.run = e.run AND n.comm_id = e.comm_id AND n.rank = e.rank
    GROUP BY e.run, e.comm_id, e.rank, e.dst_rank
),
edges AS (
    -- NCCL's declared ring of the communicator
    SELECT c.*, r.dst_rank, r.share, 'nccl' AS neighbours, 'RING' AS modelled
    FROM calls AS c
    JOIN ring AS r ON r.run = c.run AND r.comm_id = c.nccl_comm AND r.rank = c.rank
    WHERE c.op IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce')
          AND NOT (c.algo = 'TREE' AND c.op = 'all_reduce'
                   AND EXISTS (SELECT 1 FROM tree AS t WHERE t.run = c.run AND t.comm_id = c.nccl_comm))
    UNION ALL
    -- rank order, when NCCL declared no ring for it
    SELECT c.*, ((c.rank + CASE WHEN c.gloo THEN c.n - 1 ELSE 1 END) % c.n)::INTEGER, 1.0, 'rank order', 'RING'
    FROM calls AS c
    WHERE c.op IN ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce') AND c.n > 1
          AND NOT EXISTS (SELECT 1 FROM ring AS r WHERE r.run = c.run AND r.comm_id = c.nccl_comm AND r.rank = c.rank)
    UNION ALL
    -- NCCL's trees, for a tree all-reduce
    SELECT c.*, t.dst_rank, t.share, 'nccl', 'TREE'
    FROM calls AS c
    JOIN tree AS t ON t.run = c.run AND t.comm_id = c.nccl_comm AND t.rank = c.rank
    WHERE c.op = 'all_reduce' AND c.algo = 'TREE'
    UNION ALL
    SELECT c.*, c.peer, 1.0, 'peer', 'P2P' FROM calls AS c WHERE c.op = 'send' AND c.peer IS NOT NULL
),
modelled AS (
    SELECT *,
           CASE
               WHEN modelled = 'TREE' THEN bytes * share
               WHEN op = 'all_reduce' THEN 2.0 * (n - 1) / n * bytes * share
               WHEN op IN ('all_gather', 'reduce_scatter') THEN (n - 1) * bytes * share
               WHEN op = 'broadcast' THEN CASE WHEN dst_rank <> root THEN bytes * share ELSE 0 END
               WHEN op = 'reduce' THEN CASE WHEN rank <> root THEN bytes * share ELSE 0 END
               WHEN op = 'send' THEN bytes
           END * CASE upper(protocol) WHEN 'LL' THEN 2.0 WHEN 'LL128' THEN 128.0 / 120 ELSE 1.0 END AS predicted_bytes
    FROM edges
),
rank_workers AS (
    SELECT run, source, comm, rank, CASE WHEN count(DISTINCT worker) = 1 THEN any_value(worker) END AS worker
    FROM collective_calls
    WHERE worker IS NOT NULL
    GROUP BY ALL
)
SELECT m.run, m.source, m.file, m.comm, m.seq, m.op, m.bytes, m.step, m.modelled AS algorithm, m.n AS n_ranks,
       m.rank AS src_rank, m.dst_rank, m.worker AS src_worker,
       coalesce(rw.worker, nw.worker, cw.worker) AS dst_worker,
       m.start_ns, m.end_ns, m.clock_offset_ns, m.instance_start_ns, m.instance_end_ns, m.instance_ranks,
       m.predicted_bytes, m.neighbours
FROM modelled AS m
LEFT JOIN rank_workers AS rw
    ON rw.run = m.run AND rw.source = m.source AND rw.comm IS NOT DISTINCT FROM m.comm AND rw.rank = m.dst_rank
LEFT JOIN collective_rank_workers AS nw
    ON nw.run = m.run AND nw.rank = m.dst_rank AND nw.nranks = m.n AND nw.paired = 'nccl log'
LEFT JOIN collective_rank_workers AS cw ON cw.run = m.run AND cw.rank = m.dst_rank AND cw.paired = 'capture'
WHERE m.predicted_bytes > 0;
