-- NCCL's declared communication graph per run: the directed rank-to-rank edges its logs name, on workers.
-- Kind: building block
-- Partition: run
--
-- Edges (each once per run, communicator, kind, channel and direction):
--   ring        rank → next and prev → rank of every `Ring CC : prev -> rank -> next` line, and of
--               rank 0's `Channel CC/NN : r0 r1 …` listing, so one rank's log already gives a
--               whole ring; data of a ring all-reduce flows along these edges
--   tree        both directions of every link of `Trees [c] down/down/down->rank->up` (the
--               reduction goes up, the broadcast down); a rank whose log has no `Trees` line
--               falls back on its `Tree c : up -> rank -> down/down/down` lines (NCCL prints those
--               as it builds the trees, possibly for more channels than the communicator keeps:
--               the 2.20.5 RoCE logs have `Tree 0` and `Tree 1` beside `Trees [0]`)
--   connection  every `Channel CC/i : a[.] -> b[.] [send|receive] via T` line: a transport NCCL set
--               up (for rings, trees or both), whether or not data later used it
-- Ranks become workers through nccl_rank_workers (per run, communicator and rank; NULL when the
-- rank's log is missing, unpaired, or two logs claim the rank for different workers).
--
-- Parameters: none.
-- Columns:
--   run, comm_id, kind, channel
--   src_rank, dst_rank       ranks in the communicator
--   src_worker, dst_worker   their workers; NULL when unknown
--   transport                NET/IB, NET/Socket, P2P, SHM, … (connections only)
--   qps                      destination QPs the sender logged for this pair (remote QP numbers,
--                            NCCL 2.20–2.26 over RoCE), ascending; NULL when none were logged
CREATE OR REPLACE VIEW nccl_edges AS
WITH
trees AS (
    SELECT * EXCLUDE (has_trees)
    FROM (
        SELECT *, bool_or(source IS DISTINCT FROM 'Tree') OVER (PARTITION BY run, file, comm_id, rank)
                  AS has_trees  -- datasets from before `Tree` lines were read: source NULL
        FROM nccl_trees
    )
    WHERE source IS DISTINCT FROM 'Tree' OR NOT has_trees
),
ranked AS (
    SELECT run, comm_id, rank,
           CASE WHEN count(DISTINCT worker) = 1 THEN any_value(worker) END AS worker
    FROM nccl_rank_workers
    GROUP BY run, comm_id, rank
),
declared AS (
    SELECT run, comm_id, 'ring' AS kind, channel, rank AS src_rank, next_rank AS dst_rank,
           NULL::VARCHAR AS transport
    FROM nccl_rings WHERE next_rank >= 0 AND next_rank <> rank
    UNION
    SELECT run, comm_id, 'ring', channel, prev_rank, rank, NULL
    FROM nccl_rings WHERE prev_rank >= 0 AND prev_rank <> rank
    UNION
    SELECT run, comm_id, 'tree', channel, rank, up_rank, NULL FROM trees WHERE up_rank >= 0
    UNION
    SELECT run, comm_id, 'tree', channel, up_rank, rank, NULL FROM trees WHERE up_rank >= 0
    UNION
    SELECT run, comm_id, 'tree', channel, rank, unnest(down_ranks), NULL FROM trees
    UNION
    SELECT run, comm_id, 'tree', channel, unnest(down_ranks), rank, NULL FROM trees
    UNION
    SELECT run, comm_id, 'connection', channel, src_rank, dst_rank, transport FROM nccl_channels
),
logged_qps AS (
    SELECT run, comm_id, rank AS src_rank, peer_rank AS dst_rank,
           list(DISTINCT remote_qpn ORDER BY remote_qpn) AS qps
    FROM nccl_qps
    WHERE peer_rank IS NOT NULL AND remote_qpn IS NOT NULL
    GROUP BY run, comm_id, rank, peer_rank
)
SELECT e.run, e.comm_id, e.kind, e.channel, e.src_rank, e.dst_rank,
       s.worker AS src_worker, d.worker AS dst_worker, e.transport, q.qps
FROM declared AS e
LEFT JOIN ranked AS s ON s.run = e.run AND s.comm_id IS NOT DISTINCT FROM e.comm_id AND s.rank = e.src_rank
LEFT JOIN ranked AS d ON d.run = e.run AND d.comm_id IS NOT DISTINCT FROM e.comm_id AND d.rank = e.dst_rank
LEFT JOIN logged_qps AS q
    ON q.run = e.run AND q.comm_id IS NOT DISTINCT FROM e.comm_id
    AND q.src_rank = e.src_rank AND q.dst_rank = e.dst_rank;
