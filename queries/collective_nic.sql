-- Each recorded collective on each worker: the bytes its NIC sent meanwhile (its transmit counter) against the algorithm's prediction.
-- Kind: answer
-- Key: run, source, comm, seq, worker
-- Headline: predicted_bytes, nic_bytes, ratio, group_ratio
-- Needs: collectives, counters
-- Partition: run
--
-- Semantics: where no packet is captured (an RDMA cluster, `[capture] method = "counters"`), a port
-- counter still says what each worker's NIC sent. The prediction is collective_links' bytes from the
-- worker to every rank it sends to (its ring neighbour, tree parent and children), summed. The NIC's
-- bytes come from the worker's transmit counter (the RDMA port's port_xmit_data where the worker has
-- one, else the interface's tx_bytes), on the worker's own clock: the instance's window (earliest
-- start to latest end over its ranks, on the runner's clock) plus the worker's host clock offset.
--   nic_bytes     each sample's delta shared by time over the window, as nic_util does: right when
--                 the collective spans many samples; a collective shorter than a sample gets its share
--                 of the sample's time, not its bytes
--   group         collectives of the worker whose windows touch the same samples, taken together:
--                 the whole samples they touch (no sharing), against the sum of their predictions;
--                 with idle samples between groups (compute between DDP's all-reduce buckets of a
--                 step) a group's ratio is what the NIC sent per predicted byte, at any sampling
-- What a ratio above 1 holds: a counter counts frames, not payload (Ethernet/IP/TCP or IB/UDP
-- headers: a few % at MTU 1500; the ACKs of what the worker receives; NCCL's framing) and whatever
-- else the worker sent meanwhile (another communicator, storage, the rendezvous). Coarser than
-- collective_wire (no flow split, the sampling's time resolution), but available without packets.
--
-- Parameters:
--   runs     list of run names; NULL = every run
-- Columns:
--   run, source, comm, seq, op, step   the collective instance (collective_calls)
--   bytes                 the message size, bytes (NCCL's count × element size)
--   n_ranks               the communicator's size
--   worker                the sending worker (collective_links.src_worker)
--   counter               port_xmit_data (RDMA port) | tx_bytes (interface)
--   start_ns, end_ns      the instance's window on the worker's clock, UTC ns
--   window_samples        the window's length in sampling intervals (below 1: shorter than a sample)
--   predicted_bytes       bytes the algorithm has the worker send, bytes
--   nic_bytes             bytes the worker's counter moved in the window (shared by time), bytes
--   ratio                 nic_bytes / predicted_bytes
--   group_first_seq       seq of the group's earliest-starting collective (its name within the worker)
--   group_collectives     collectives in the group
--   group_predicted_bytes sum of the group's predictions, bytes
--   group_nic_bytes       the counter's deltas over the samples the group touches, bytes; NULL when
--                         one of them is a failed read
--   group_ratio           group_nic_bytes / group_predicted_bytes
CREATE OR REPLACE MACRO collective_nic(runs := NULL) AS TABLE
WITH
pred AS (
    SELECT run, source, comm, seq, any_value(op) AS op, any_value(step) AS step, any_value(bytes) AS bytes,
           any_value(n_ranks) AS n_ranks, src_worker AS worker,
           any_value(instance_start_ns) + coalesce(max(clock_offset_ns), 0) AS start_ns,
           any_value(instance_end_ns) + coalesce(max(clock_offset_ns), 0) AS end_ns,
           sum(predicted_bytes) AS predicted_bytes
    FROM collective_links
    WHERE (runs IS NULL OR list_contains(runs, run)) AND src_worker IS NOT NULL
    GROUP BY run, source, comm, seq, src_worker
),
tx AS (  -- the worker's transmit counter (nic_tx: its RDMA port's where it has one, else its interface's)
    SELECT * FROM nic_tx(runs := runs) WHERE run IN (SELECT run FROM pred)
),
sampling AS (
    SELECT run, max(interval_ns) AS interval_ns FROM counter_sources GROUP BY run
),
touched AS (
    SELECT p.run, p.source, p.comm, p.seq, p.worker, any_value(t.counter) AS counter,
           sum(t.delta * (least(t.t1, p.end_ns) - greatest(t.t0, p.start_ns)) / (t.t1 - t.t0)) AS nic_bytes,
           min(t.k) AS k0, max(t.k) AS k1
    FROM pred AS p
    JOIN tx AS t ON t.run = p.run AND t.worker = p.worker AND t.t1 > p.start_ns AND t.t0 < p.end_ns
    GROUP BY p.run, p.source, p.comm, p.seq, p.worker
),
opened AS (
    -- a collective opens a group when it touches no sample an earlier one of the worker touched
    SELECT *,
           CASE WHEN k0 > max(k1) OVER (PARTITION BY run, worker ORDER BY k0, k1, source, comm, seq
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                THEN 1 ELSE 0 END AS opens
    FROM touched
),
grouped AS (
    SELECT *, sum(opens) OVER (PARTITION BY run, worker ORDER BY k0, k1, source, comm, seq
                               ROWS UNBOUNDED PRECEDING) AS g
    FROM opened
),
groups AS (
    SELECT g.run, g.worker, g.g, min(g.k0) AS k0, max(g.k1) AS k1,
           arg_min(g.seq, (p.start_ns, g.seq)) AS first_seq, count(*) AS n, sum(p.predicted_bytes) AS predicted
    FROM grouped AS g
    JOIN pred AS p USING (run, source, comm, seq, worker)
    GROUP BY g.run, g.worker, g.g
),
group_bytes AS (
    SELECT s.run, s.worker, s.g,
           CASE WHEN count(*) FILTER (WHERE t.delta IS NULL) = 0 THEN sum(t.delta) END AS nic
    FROM groups AS s
    JOIN tx AS t ON t.run = s.run AND t.worker = s.worker AND t.k BETWEEN s.k0 AND s.k1
    GROUP BY s.run, s.worker, s.g
)
SELECT p.run, p.source, p.comm, p.seq, p.op, p.step, p.bytes, p.n_ranks, p.worker, t.counter,
       p.start_ns, p.end_ns,
       (p.end_ns - p.start_ns) / sg.interval_ns AS window_samples,
       p.predicted_bytes, t.nic_bytes,
       t.nic_bytes / nullif(p.predicted_bytes, 0) AS ratio,
       gs.first_seq AS group_first_seq, gs.n AS group_collectives,
       gs.predicted AS group_predicted_bytes, gb.nic AS group_nic_bytes,
       gb.nic / nullif(gs.predicted, 0) AS group_ratio
FROM pred AS p
JOIN grouped AS t USING (run, source, comm, seq, worker)
JOIN groups AS gs ON gs.run = t.run AND gs.worker = t.worker AND gs.g = t.g
LEFT JOIN group_bytes AS gb ON gb.run = t.run AND gb.worker = t.worker AND gb.g = t.g
LEFT JOIN sampling AS sg ON sg.run = p.run
ORDER BY p.run, p.worker, p.start_ns, p.source, p.comm, p.seq;

CREATE OR REPLACE VIEW collective_nic AS SELECT * FROM collective_nic();
