-- Per training step and worker: compute, communication, exposed communication, busiest link's share.
--
-- Exposed communication is the communication no compute hid; the link share is how busy the worker's
-- busiest outgoing link was in the step.
-- Kind: answer
-- Key: run, worker, step
-- Headline: compute_ns, communication_ns, overlap_ns, exposed_ns, gpu_idle_ns
-- Needs: collectives, steps
-- Partition: run
--
-- As Meta's Holistic Trace Analysis (HTA) does from PyTorch traces alone, on the GPU: compute is the
-- time any compute kernel runs (every kernel but NCCL's), communication the time any NCCL kernel
-- runs, memory the time any memcpy or memset runs, GPU idle the time none of them runs, and exposed
-- communication the part of communication when no compute runs (the step waits on the network).
-- Steps come from the trace: ProfilerStep#N's span on the GPU when it has one (from the first to the
-- last GPU activity launched in the step, HTA's iteration), else on the host; the iteration is the
-- step's wall time, ProfilerStep#N on the host (the GPU span is shorter when the GPU waits on the
-- host, or the other ranks). Per step, gpu_idle_ns, compute_ns and step_ns − compute_ns −
-- gpu_idle_ns are HTA 0.5.0's temporal breakdown (idle, compute, non-compute) of the iteration's
-- GPU events and hidden_share its comm/comp overlap: to the ns with HTA_DISABLE_NS_ROUNDING=1,
-- within 1 % of the step by default (HTA rounds each event inwards to whole µs; README). A worker
-- whose sources profiled no steps gets the training log's steps (step k: after Batch row k−1 up to
-- Batch row k) with its collectives' spans as communication and compute unknown, as does a CPU-only
-- trace (gloo: the collectives run on gloo's threads, no kernels). Time is the union of intervals
-- clipped to the step, so overlapping kernels count once. The wire: for each link the worker sends
-- on, its frames in the step with gaps of at most idle_ns counted busy (as collective_wire's busy_ns);
-- the busiest link and its share of the step.
--
-- Parameters:
--   runs      list of run names; NULL = every run
--   idle_ns   a longer gap between frames is idle time, ns (default 1 000 000 = 1 ms)
-- Columns:
--   run, worker, rank, step
--   timed_by            'pytorch_profiler' (the trace's step) | 'train_log'
--   start_ns, end_ns    the step, UTC ns
--   step_ns             end_ns − start_ns, ns
--   compute_ns          time any compute kernel ran (not NCCL's, memcpy or memset), ns; NULL when not
--                       traced
--   communication_ns    time any collective ran (NCCL kernels; else the collectives' spans), ns
--   overlap_ns          communication during compute, ns; NULL when compute is
--   exposed_ns          communication_ns − overlap_ns: communication nothing hid, ns; NULL when compute is
--   exposed_share       exposed_ns / step_ns
--   busiest_link        the worker it sends the most busy time to in the step; NULL without frames
--   link_busy_ns        that link's busy time in the step, ns
--   link_busy_share     link_busy_ns / step_ns
--   iteration_ns        the iteration's wall time: ProfilerStep#N on the host (else to the next step's
--                       start); a train_log step's step_ns, ns
--   memory_ns           time any memcpy or memset ran, ns; NULL when not traced
--   gpu_idle_ns         time in the step when nothing ran on the GPU (no kernel, memcpy or memset), ns;
--                       NULL when not traced
--   gpu_idle_share, compute_share, communication_share   gpu_idle_ns, compute_ns, communication_ns / step_ns
--   non_compute_share   (step_ns − compute_ns − gpu_idle_ns) / step_ns: GPU busy without compute
--                       (exposed communication, memory); the three shares HTA's sum to 1
--   hidden_share        overlap_ns / communication_ns: the communication compute hid; NULL without any
--   iteration_idle_share   1 − (step_ns − gpu_idle_ns) / iteration_ns (≥ 0): the share of the iteration's
--                       wall time the GPU had none of the step's work to run
CREATE OR REPLACE MACRO step_breakdown(runs := NULL, idle_ns := 1000000) AS TABLE
WITH
files AS (  -- each trace's worker, as collective_calls placed it (or the rank's capture)
    SELECT p.run, p.file, any_value(p.rank) AS rank,
           coalesce(any_value(c.worker), any_value(r.worker)) AS worker
    FROM (SELECT DISTINCT run, file, rank FROM profiler_steps) AS p
    LEFT JOIN collective_calls AS c ON c.run = p.run AND c.file = p.file
    LEFT JOIN collective_rank_workers AS r ON r.run = p.run AND r.rank = p.rank AND r.paired = 'capture'
    WHERE runs IS NULL OR list_contains(runs, p.run)
    GROUP BY p.run, p.file
),
profiled AS (
    SELECT s.run, f.worker, s.rank, s.step, s.file, 'pytorch_profiler' AS timed_by,
           coalesce(s.gpu_start_ns, s.start_ns) AS t0, coalesce(s.gpu_end_ns, s.end_ns) AS t1,
           coalesce(s.end_ns - s.start_ns,
                    lead(coalesce(s.gpu_start_ns, s.start_ns)) OVER (PARTITION BY s.run, s.file ORDER BY s.step)
                    - coalesce(s.gpu_start_ns, s.start_ns)) AS iteration_ns
    FROM profiler_steps AS s
    JOIN files AS f ON f.run = s.run AND f.file = s.file
    WHERE f.worker IS NOT NULL AND coalesce(s.gpu_start_ns, s.start_ns) < coalesce(s.gpu_end_ns, s.end_ns)
),
logged AS (  -- workers with collectives but no profiled steps
    SELECT b.run, w.worker, w.rank, b.step, NULL::VARCHAR AS file, 'train_log' AS timed_by,
           b.start_ns AS t0, b.end_ns AS t1, b.end_ns - b.start_ns AS iteration_ns
    FROM (SELECT run, worker, min(rank) AS rank FROM collective_calls WHERE worker IS NOT NULL GROUP BY ALL) AS w
    JOIN train_steps(runs := runs) AS b ON b.run = w.run
    WHERE NOT EXISTS (SELECT 1 FROM profiled AS p WHERE p.run = w.run AND p.worker = w.worker)
),
steps AS (  -- sid: each step's number, so that joins and the sweep key on one integer
    SELECT *, row_number() OVER (ORDER BY run, worker, step, file, t0) AS sid
    FROM (SELECT * FROM profiled UNION ALL SELECT * FROM logged)
),
traced AS (SELECT DISTINCT run, file FROM profiler_kernels),
traced_files AS (SELECT run, file, row_number() OVER (ORDER BY run, file) AS fid FROM traced),
-- A kernel is paired with the steps it overlaps through buckets of 2^24 ns (16.8 ms): each step and each
-- kernel over the buckets it covers, a pair counted once, in the bucket of the later start (which both
-- cover); a range join on the file alone compares every kernel with every step of its trace.
step_buckets AS (
    SELECT s.sid, f.fid, s.t0, s.t1, unnest(range(s.t0 // 16777216, (s.t1 - 1) // 16777216 + 1)) AS bucket
    FROM steps AS s
    JOIN traced_files AS f ON f.run = s.run AND f.file = s.file
),
kernel_buckets AS (
    SELECT f.fid, k.kind, k.start_ns, k.end_ns,
           unnest(range(k.start_ns // 16777216, greatest(k.end_ns - 1, k.start_ns) // 16777216 + 1)) AS bucket
    FROM profiler_kernels AS k
    JOIN traced_files AS f ON f.run = k.run AND f.file = k.file
),
spans AS (  -- what ran in each step, clipped to it: 'p' compute, 'c' communication, 'm' memcpy/memset
    SELECT s.sid, CASE k.kind WHEN 'communication' THEN 'c' WHEN 'compute' THEN 'p' ELSE 'm' END AS what,
           greatest(k.start_ns, s.t0) AS a, least(k.end_ns, s.t1) AS b
    FROM kernel_buckets AS k
    JOIN step_buckets AS s ON s.fid = k.fid AND s.bucket = k.bucket
    WHERE k.start_ns < s.t1 AND k.end_ns > s.t0 AND k.bucket = greatest(k.start_ns // 16777216, s.t0 // 16777216)
    UNION ALL
    SELECT s.sid, 'c', greatest(c.start_ns, s.t0), least(c.end_ns, s.t1)
    FROM steps AS s
    JOIN collective_calls AS c
        ON c.run = s.run AND c.worker = s.worker AND c.start_ns < s.t1 AND c.end_ns > s.t0
        AND (s.file IS NULL OR c.file = s.file)
    WHERE NOT EXISTS (SELECT 1 FROM traced AS t WHERE t.run = s.run AND t.file = s.file)
),
edges AS (  -- each span's start and end; the kinds packed in one count (c · 2^40 + p · 2^20 + m)
    SELECT sid, a AS t, CASE what WHEN 'c' THEN 1099511627776 WHEN 'p' THEN 1048576 ELSE 1 END AS d FROM spans
    UNION ALL
    SELECT sid, b, CASE what WHEN 'c' THEN -1099511627776 WHEN 'p' THEN -1048576 ELSE -1 END FROM spans
),
swept AS (  -- a sweep over the step's edges: how many of each kind run between consecutive edges (at
            -- tied times only the last edge's row has a duration, and it counts every tied edge)
    SELECT sid, cum >> 40 AS c, (cum >> 20) & 1048575 AS p, cum & 1048575 AS m, dt
    FROM (
        SELECT sid, sum(d) OVER w AS cum, lead(t) OVER w - t AS dt
        FROM edges
        WINDOW w AS (PARTITION BY sid ORDER BY t ROWS UNBOUNDED PRECEDING)
    )
),
busy AS (
    SELECT sid,
           coalesce(sum(dt) FILTER (WHERE c > 0), 0)::BIGINT AS communication_ns,
           coalesce(sum(dt) FILTER (WHERE p > 0), 0)::BIGINT AS compute_ns,
           coalesce(sum(dt) FILTER (WHERE c > 0 AND p > 0), 0)::BIGINT AS overlap_ns,
           coalesce(sum(dt) FILTER (WHERE m > 0), 0)::BIGINT AS memory_ns,
           coalesce(sum(dt) FILTER (WHERE c > 0 OR p > 0 OR m > 0), 0)::BIGINT AS gpu_busy_ns
    FROM swept
    GROUP BY sid
),
sent AS (
    SELECT s.run, s.worker, s.step, d.worker AS dst, p.ts_ns,
           p.ts_ns - lag(p.ts_ns) OVER (PARTITION BY s.run, s.worker, s.step, d.worker ORDER BY p.ts_ns) AS gap
    FROM steps AS s
    JOIN workers AS w ON w.run = s.run AND w.worker = s.worker
    JOIN workers AS d ON d.run = s.run AND d.worker <> s.worker
    JOIN packets AS p
        ON p.run = s.run AND p.src_ip = w.ip AND p.dst_ip = d.ip AND p.ts_ns BETWEEN s.t0 AND s.t1
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.l4_payload_len > 0
),
links AS (
    SELECT run, worker, step, arg_max(dst, busy_ns) AS busiest_link, max(busy_ns) AS link_busy_ns
    FROM (
        SELECT run, worker, step, dst, coalesce(sum(gap) FILTER (WHERE gap <= idle_ns), 0)::BIGINT AS busy_ns
        FROM sent
        GROUP BY ALL
    )
    GROUP BY run, worker, step
),
measured AS (
    SELECT s.run, s.worker, s.rank, s.step, s.timed_by, s.t0 AS start_ns, s.t1 AS end_ns, s.t1 - s.t0 AS step_ns,
           s.iteration_ns,
           CASE WHEN t.file IS NOT NULL THEN coalesce(b.compute_ns, 0) END AS compute_ns,
           coalesce(b.communication_ns, 0) AS communication_ns,
           CASE WHEN t.file IS NOT NULL THEN coalesce(b.overlap_ns, 0) END AS overlap_ns,
           CASE WHEN t.file IS NOT NULL THEN coalesce(b.communication_ns, 0) - coalesce(b.overlap_ns, 0) END
               AS exposed_ns,
           CASE WHEN t.file IS NOT NULL THEN coalesce(b.memory_ns, 0) END AS memory_ns,
           CASE WHEN t.file IS NOT NULL THEN s.t1 - s.t0 - coalesce(b.gpu_busy_ns, 0) END AS gpu_idle_ns,
           l.busiest_link, coalesce(l.link_busy_ns, 0) AS link_busy_ns
    FROM steps AS s
    LEFT JOIN busy AS b ON b.sid = s.sid
    LEFT JOIN links AS l ON l.run = s.run AND l.worker = s.worker AND l.step = s.step
    LEFT JOIN traced AS t ON t.run = s.run AND t.file = s.file
)
SELECT run, worker, rank, step, timed_by, start_ns, end_ns, step_ns, compute_ns, communication_ns, overlap_ns,
       exposed_ns, exposed_ns / step_ns AS exposed_share, busiest_link, link_busy_ns,
       link_busy_ns / step_ns AS link_busy_share,
       iteration_ns, memory_ns, gpu_idle_ns,
       gpu_idle_ns / step_ns AS gpu_idle_share,
       compute_ns / step_ns AS compute_share,
       communication_ns / step_ns AS communication_share,
       (step_ns - compute_ns - gpu_idle_ns) / step_ns AS non_compute_share,
       overlap_ns / nullif(communication_ns, 0) AS hidden_share,
       greatest(1 - (step_ns - gpu_idle_ns) / iteration_ns, 0) AS iteration_idle_share
FROM measured
ORDER BY run, worker, step;

CREATE OR REPLACE VIEW step_breakdown AS SELECT * FROM step_breakdown();
