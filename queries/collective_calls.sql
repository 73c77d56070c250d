-- Every collective an event source recorded, with the worker it ran on, its step and its instance.
-- Kind: building block
-- Partition: run
--
-- One row per collective per rank per source (table `collectives`: PyTorch profiler, NCCL Inspector,
-- NCCL's example profiler plugin, Horovod's timeline). A row gets its worker, first found:
--   name      the file is named `worker-<i>-…` like that worker's capture (ingest)
--   process   an NCCL log of the same process (pid, and host when the source names it) is paired
--             with a worker (nccl_rank_workers)
--   rank      an NCCL log of the same rank in a communicator of the same size is paired with one
--   capture   the worker whose capture is named `worker-<rank>-…` (how tracecore's runners name rank
--             r's capture); these two as collective_rank_workers has them
-- Its NCCL communicator (`nccl_comm`, NCCL's commId, for the declared rings and trees): the source's
-- own hash when an NCCL log prints it (NCCL's plugins; the Inspector prints its first 14 hex digits),
-- else the first communicator of the same size that the same process set up (PyTorch's default
-- process group is the first). Its step: the source's own (ProfilerStep#N), else the training log's
-- (train_steps: after Batch row k−1 up to row k); a collective before the second Batch row gets none.
-- An instance is one collective on all its ranks: (run, source, comm, seq) — every rank issues a
-- communicator's collectives in the same order, and each source numbers them from its first record.
--
-- Parameters: none.
-- Columns:
--   run, source, backend, file, rank, worker, comm, comm_size, nccl_comm, seq, op, bytes, dtype, peer,
--   algorithm, protocol, n_channels, start_ns, end_ns, time_source, call_start_ns, call_end_ns,
--   algbw_gbs, busbw_gbs      as in table `collectives` (bytes: NCCL's count × element size)
--   worker_from               'name' | 'process' | 'rank' | 'capture'; NULL when no worker is found
--   step                      training step (source's own, else the training log's); NULL when neither
--   clock_offset_ns           the worker's host clock − the runner's (run.toml [[hosts]], measured by
--                             `tracecore run`), ns; NULL when not recorded (taken as 0)
--   instance_start_ns         earliest start of the instance over its ranks, each less its host's
--                             clock offset: on the runner's clock (the hosts' own without offsets), UTC ns
--   instance_end_ns           latest end of the instance over its ranks, on the same clock, UTC ns
--   instance_ranks            ranks of this source that recorded the instance
--   n_ranks                   N, the communicator's size: the source's own (comm_size), else NCCL's log of
--                             its communicator (nccl_ranks.nranks of nccl_comm: NCCL's example profiler
--                             plugin prints no size), else the ranks of this source that recorded any of
--                             its collectives; NULL only without a rank
--   n_ranks_from              'source' | 'nccl log' | 'ranks seen'
CREATE OR REPLACE VIEW collective_calls AS
WITH
by_process AS (
    SELECT c.run, c.file, CASE WHEN count(DISTINCT p.worker) = 1 THEN any_value(p.worker) END AS worker
    FROM (SELECT DISTINCT run, file, pid, host FROM collectives WHERE pid IS NOT NULL) AS c
    JOIN nccl_rank_workers AS p
        ON p.run = c.run AND p.pid = c.pid AND (c.host IS NULL OR p.host = c.host) AND p.worker IS NOT NULL
    GROUP BY c.run, c.file
),
comms AS (
    SELECT c.run, c.file, c.comm,
           coalesce(
               any_value(r.comm_id) FILTER (WHERE r.comm_id = c.comm),
               any_value(r.comm_id) FILTER (WHERE length(c.comm) >= 10 AND starts_with(r.comm_id, c.comm)),
               arg_min(r.comm_id, r.line) FILTER (WHERE r.pid = c.pid AND r.nranks = c.comm_size)
           ) AS nccl_comm
    FROM (SELECT DISTINCT run, file, comm, pid, comm_size FROM collectives) AS c
    JOIN nccl_ranks AS r ON r.run = c.run
    GROUP BY c.run, c.file, c.comm
),
placed AS (
    SELECT c.*,
           coalesce(c.worker, bp.worker, br.worker, bc.worker) AS found_worker,
           CASE
               WHEN c.worker IS NOT NULL THEN 'name'
               WHEN bp.worker IS NOT NULL THEN 'process'
               WHEN br.worker IS NOT NULL THEN 'rank'
               WHEN bc.worker IS NOT NULL THEN 'capture'
           END AS worker_from,
           m.nccl_comm, hc.offset_ns AS clock_offset_ns
    FROM collectives AS c
    LEFT JOIN by_process AS bp ON bp.run = c.run AND bp.file = c.file
    LEFT JOIN collective_rank_workers AS br
        ON br.run = c.run AND br.rank = c.rank AND br.nranks = c.comm_size AND br.paired = 'nccl log'
    LEFT JOIN collective_rank_workers AS bc ON bc.run = c.run AND bc.rank = c.rank AND bc.paired = 'capture'
    LEFT JOIN comms AS m ON m.run = c.run AND m.file = c.file AND m.comm IS NOT DISTINCT FROM c.comm
    LEFT JOIN workers AS w ON w.run = c.run AND w.worker = coalesce(c.worker, bp.worker, br.worker, bc.worker)
    LEFT JOIN host_clocks AS hc ON hc.run = c.run AND hc.ip = w.ip
),
sizes AS (  -- each communicator's size: NCCL's log of it, else the ranks of the source that recorded it
    SELECT c.run, c.source, c.comm, any_value(z.nranks) AS logged, count(DISTINCT c.rank) AS seen
    FROM (SELECT DISTINCT run, source, comm, nccl_comm, rank FROM placed) AS c
    LEFT JOIN (SELECT run, comm_id, max(nranks) AS nranks FROM nccl_ranks GROUP BY ALL) AS z
        ON z.run = c.run AND z.comm_id = c.nccl_comm
    GROUP BY ALL
),
stepped AS (
    SELECT p.run, p.file, p.line, p.comm, p.seq, any_value(s.step) AS log_step
    FROM placed AS p
    JOIN train_steps AS s
        ON s.run = p.run AND coalesce(p.call_start_ns, p.start_ns) > s.start_ns
        AND coalesce(p.call_start_ns, p.start_ns) <= s.end_ns
    WHERE p.step IS NULL
    GROUP BY ALL
)
SELECT p.run, p.source, p.backend, p.file, p.rank, p.found_worker AS worker, p.worker_from, p.comm, p.comm_size, p.nccl_comm,
       p.seq, p.op, p.bytes, p.dtype, p.peer, p.algorithm, p.protocol, p.n_channels, p.start_ns, p.end_ns,
       p.time_source, p.call_start_ns, p.call_end_ns, coalesce(p.step, s.log_step) AS step, p.algbw_gbs,
       p.busbw_gbs, p.clock_offset_ns,
       min(p.start_ns - coalesce(p.clock_offset_ns, 0)) OVER instance AS instance_start_ns,
       max(p.end_ns - coalesce(p.clock_offset_ns, 0)) OVER instance AS instance_end_ns,
       count(*) OVER instance AS instance_ranks,
       coalesce(p.comm_size, z.logged, z.seen) AS n_ranks,
       CASE
           WHEN p.comm_size IS NOT NULL THEN 'source'
           WHEN z.logged IS NOT NULL THEN 'nccl log'
           WHEN z.seen IS NOT NULL THEN 'ranks seen'
       END AS n_ranks_from
FROM placed AS p
LEFT JOIN stepped AS s
    ON s.run = p.run AND s.file = p.file AND s.line = p.line AND s.comm IS NOT DISTINCT FROM p.comm AND s.seq = p.seq
LEFT JOIN sizes AS z ON z.run = p.run AND z.source = p.source AND z.comm IS NOT DISTINCT FROM p.comm
WINDOW instance AS (PARTITION BY p.run, p.source, p.comm, p.seq);
