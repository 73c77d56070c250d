-- collective_verdicts' rules over the rows of collective_wire that a query names: the verdicts of rows
-- computed once and judged by several views (findings), or of the whole collective_wire view.
-- Kind: building block
-- Partition: run
--
-- `wire` names a table, view or common table expression of the calling query with collective_wire's
-- columns (DuckDB's query_table); collective_verdicts computes it for its runs and calls this. The
-- rules, parameters and columns are collective_verdicts'.
--
-- Parameters:
--   wire    the name of collective_wire's rows (default: the view collective_wire, every run)
--   runs, straggler_share, min_late_ns, latency_bytes, slow_link_share, busy_share, peak_share,
--   slow_factor, retrans_share   as collective_verdicts'
-- Columns: as collective_verdicts'
CREATE OR REPLACE MACRO collective_verdicts_of(wire := 'collective_wire', runs := NULL, straggler_share := 0.5, min_late_ns := 1000000,
    latency_bytes := 65536, slow_link_share := 0.5, busy_share := 0.7, peak_share := 0.7, slow_factor := 1.5,
    retrans_share := 0.005) AS TABLE
WITH
calls AS (
    SELECT run, source, comm, seq, op, bytes, step, rank, worker, coalesce(clock_offset_ns, 0)::BIGINT AS off,
           start_ns - coalesce(clock_offset_ns, 0) AS t0, end_ns - coalesce(clock_offset_ns, 0) AS t1
    FROM collective_calls
    WHERE (runs IS NULL OR list_contains(runs, run)) AND start_ns IS NOT NULL
),
instances AS (
    SELECT run, source, comm, seq, any_value(op) AS op, any_value(bytes) AS bytes, any_value(step) AS step,
           count(*) AS ranks, min(t0) AS start_ns, max(t1) AS end_ns, max(t0) AS last_start_ns,
           arg_max(rank, t0) AS late_rank, arg_max(worker, t0) AS late_worker,
           -- the others: every start but the last, sorted; their median
           list_aggregate(list_slice(list_sort(list(t0)), 1, count(*) - 1), 'median') AS others_start,
           list(DISTINCT {'worker': worker, 'off': off}) FILTER (WHERE worker IS NOT NULL) AS workers_at
    FROM calls
    GROUP BY run, source, comm, seq
),
late_set AS (  -- every rank that started min_late_ns or more after the others' median start, last first
    SELECT c.run, c.source, c.comm, c.seq, list(c.rank ORDER BY c.t0 DESC, c.rank) AS late_ranks
    FROM calls AS c
    JOIN instances AS i ON i.run = c.run AND i.source = c.source AND i.comm IS NOT DISTINCT FROM c.comm AND i.seq = c.seq
    WHERE i.ranks > 1 AND c.t0 - i.others_start >= min_late_ns
    GROUP BY c.run, c.source, c.comm, c.seq
),
wire_rows AS (  -- the collectives on the wire, as collective_wire has them
    SELECT run, source, comm, seq, src_worker, dst_worker, start_ns, end_ns, frames, bytes, resent_frames,
           resent_bytes, busy_ns, gbps
    FROM query_table(wire)
    WHERE runs IS NULL OR list_contains(runs, run)
),
rated AS (  -- the links that carried the message, with their peak over the run's collectives
    SELECT *, max(gbps) OVER (PARTITION BY run, source, src_worker, dst_worker) AS peak_gbps
    FROM wire_rows
    WHERE bytes >= latency_bytes AND busy_ns > 0
),
slowest AS (
    SELECT r.run, r.source, r.comm, r.seq, r.src_worker, r.dst_worker, r.bytes, r.busy_ns, r.gbps, r.peak_gbps,
           (SELECT median(o.gbps) FROM rated AS o
            WHERE o.run = r.run AND o.source = r.source AND o.comm IS NOT DISTINCT FROM r.comm AND o.seq = r.seq
                  AND (o.src_worker, o.dst_worker) <> (r.src_worker, r.dst_worker)) AS others_gbps
    FROM (SELECT *, row_number() OVER (PARTITION BY run, source, comm, seq ORDER BY gbps, src_worker, dst_worker) AS k
          FROM rated) AS r
    WHERE k = 1
),
busiest AS (
    SELECT run, source, comm, seq, src_worker, dst_worker, bytes, busy_ns, gbps, peak_gbps
    FROM (SELECT *, row_number() OVER (PARTITION BY run, source, comm, seq
                                       ORDER BY busy_ns DESC, src_worker, dst_worker) AS k
          FROM rated)
    WHERE k = 1
),
lost AS (
    SELECT run, source, comm, seq, sum(frames) AS frames, sum(resent_frames) AS retransmissions,
           sum(resent_bytes)::BIGINT AS retransmitted_bytes, count(*) AS links
    FROM wire_rows
    GROUP BY run, source, comm, seq
),
tx AS (  -- the transmit counter of each worker of a run with NIC counters (nic_tx)
    SELECT * FROM nic_tx(runs := runs) WHERE delta IS NOT NULL
),
nic_rows AS (  -- each collective's workers: their NIC's rate over the instance, on the worker's own clock
    SELECT i.run, i.source, i.comm, i.seq, u.w.worker AS worker,
           sum(t.delta * (least(t.t1, i.end_ns + u.w.off) - greatest(t.t0, i.start_ns + u.w.off)) / (t.t1 - t.t0))
               * 8 / nullif(any_value(i.end_ns - i.start_ns), 0) AS gbps,
           any_value(i.start_ns + u.w.off) AS start_ns, any_value(i.end_ns + u.w.off) AS end_ns
    FROM instances AS i, unnest(i.workers_at) AS u(w)
    JOIN tx AS t ON t.run = i.run AND t.worker = u.w.worker AND t.t1 > i.start_ns + u.w.off AND t.t0 < i.end_ns + u.w.off
    GROUP BY i.run, i.source, i.comm, i.seq, u.w.worker
),
nic_peaks AS (
    SELECT *, max(gbps) OVER (PARTITION BY run, source, worker) AS peak_gbps FROM nic_rows
),
signals AS (  -- the congestion counters that rose during it on its workers: CNPs handled and sent, PFC pauses received
    SELECT n.run, n.source, n.comm, n.seq, n.worker, sum(c.delta) AS rose
    FROM nic_peaks AS n
    JOIN counters AS c ON c.run = n.run AND c.worker = n.worker AND c.ts_ns > n.start_ns AND c.ts_ns - c.dt_ns < n.end_ns
    WHERE c.delta > 0 AND (c.counter IN ('rp_cnp_handled', 'np_cnp_sent')
                           OR (c.source = 'ethtool' AND regexp_matches(c.counter, '^rx_prio[0-7]_pause$')))
    GROUP BY n.run, n.source, n.comm, n.seq, n.worker
),
nic_busiest AS (  -- of the workers whose congestion counters rose, the one whose NIC sent fastest
    SELECT n.run, n.source, n.comm, n.seq, arg_max(n.worker, n.gbps) AS worker, max(n.gbps) AS gbps,
           arg_max(n.peak_gbps, n.gbps) AS peak_gbps, arg_max(g.rose, n.gbps) AS rose
    FROM nic_peaks AS n
    JOIN signals AS g USING (run, source, comm, seq, worker)
    GROUP BY n.run, n.source, n.comm, n.seq
),
judged AS (
    SELECT i.*, i.end_ns - i.start_ns AS duration_ns, i.last_start_ns - i.start_ns AS spread_ns,
           CASE WHEN i.ranks > 1 THEN (i.last_start_ns - i.others_start)::BIGINT END AS late_ns,
           i.end_ns - i.last_start_ns AS joined_ns,
           coalesce(l.frames, 0) > 0 AS on_wire, coalesce(l.frames, 0) AS frames,
           coalesce(l.retransmissions, 0) AS retransmissions,
           coalesce(l.retransmitted_bytes, 0) AS retransmitted_bytes,
           s.src_worker AS slow_src, s.dst_worker AS slow_dst, s.bytes AS slow_bytes, s.busy_ns AS slow_busy_ns,
           s.gbps AS slow_gbps, s.others_gbps, s.peak_gbps AS slow_peak_gbps,
           b.src_worker AS busy_src, b.dst_worker AS busy_dst, b.bytes AS busy_bytes, b.busy_ns AS busy_busy_ns,
           b.gbps AS busy_gbps, b.peak_gbps AS busy_peak_gbps,
           nb.worker AS nic_worker, nb.gbps AS nic_gbps, nb.peak_gbps AS nic_peak_gbps, nb.rose AS nic_signals,
           ls.late_ranks
    FROM instances AS i
    LEFT JOIN lost AS l ON l.run = i.run AND l.source = i.source AND l.comm IS NOT DISTINCT FROM i.comm AND l.seq = i.seq
    LEFT JOIN slowest AS s ON s.run = i.run AND s.source = i.source AND s.comm IS NOT DISTINCT FROM i.comm AND s.seq = i.seq
    LEFT JOIN busiest AS b ON b.run = i.run AND b.source = i.source AND b.comm IS NOT DISTINCT FROM i.comm AND b.seq = i.seq
    LEFT JOIN nic_busiest AS nb
        ON nb.run = i.run AND nb.source = i.source AND nb.comm IS NOT DISTINCT FROM i.comm AND nb.seq = i.seq
    LEFT JOIN late_set AS ls
        ON ls.run = i.run AND ls.source = i.source AND ls.comm IS NOT DISTINCT FROM i.comm AND ls.seq = i.seq
),
referenced AS (
    SELECT *,
           coalesce(
               median(joined_ns) FILTER (WHERE retransmissions < retrans_share * frames OR retransmissions = 0)
                   OVER kind,
               median(joined_ns) OVER kind
           ) AS reference_joined_ns
    FROM judged
    WINDOW kind AS (PARTITION BY run, source, op, bytes)
),
ruled AS (
    SELECT *,
           CASE
               WHEN late_ns >= min_late_ns AND spread_ns >= straggler_share * duration_ns THEN 'late rank'
               WHEN retransmissions > 0 AND retransmissions >= retrans_share * frames
                    AND joined_ns >= slow_factor * reference_joined_ns THEN 'retransmitting'
               WHEN bytes < latency_bytes THEN 'small message'
               WHEN NOT on_wire AND nic_gbps >= peak_share * nic_peak_gbps THEN 'NIC congested'
               WHEN NOT on_wire THEN 'no packets'
               WHEN slow_gbps <= slow_link_share * others_gbps THEN 'slow link'
               WHEN busy_busy_ns >= busy_share * joined_ns AND busy_gbps >= peak_share * busy_peak_gbps THEN 'saturated'
               ELSE 'wire idle'
           END AS rule
    FROM referenced
),
linked AS (
    SELECT *,
           CASE rule WHEN 'slow link' THEN slow_src WHEN 'NIC congested' THEN nic_worker ELSE busy_src END AS link_src,
           CASE WHEN rule = 'slow link' THEN slow_dst ELSE busy_dst END AS link_dst,
           CASE WHEN rule = 'slow link' THEN slow_bytes ELSE busy_bytes END AS link_bytes,
           CASE WHEN rule = 'slow link' THEN slow_busy_ns ELSE busy_busy_ns END AS link_busy_ns,
           CASE rule WHEN 'slow link' THEN slow_gbps WHEN 'NIC congested' THEN nic_gbps ELSE busy_gbps END AS link_gbps,
           CASE rule WHEN 'slow link' THEN slow_peak_gbps WHEN 'NIC congested' THEN nic_peak_gbps
                     ELSE busy_peak_gbps END AS link_peak_gbps
    FROM ruled
)
SELECT run, source, comm, seq, op, step, bytes, ranks, start_ns, end_ns, duration_ns, spread_ns, late_rank,
       late_worker, late_ns, coalesce(late_ranks, []::INTEGER[]) AS late_ranks, joined_ns, link_src, link_dst, link_bytes::BIGINT AS link_bytes, link_busy_ns,
       link_busy_ns / nullif(joined_ns, 0) AS link_busy_share, link_gbps, others_gbps, link_peak_gbps,
       frames, retransmissions, retransmitted_bytes, reference_joined_ns::BIGINT AS reference_joined_ns,
       CASE rule
           WHEN 'late rank' THEN 'straggler'
           WHEN 'retransmitting' THEN 'network'
           WHEN 'small message' THEN 'latency'
           WHEN 'slow link' THEN 'network'
           WHEN 'saturated' THEN 'network'
           WHEN 'NIC congested' THEN 'network'
           WHEN 'wire idle' THEN 'compute/launch'
       END AS verdict,
       rule,
       CASE rule
           WHEN 'late rank' THEN printf('the ranks started over %.1f of its %.1f ms, rank %d (%s) last, %.1f ms after the others'' median start',
                                        spread_ns / 1e6, duration_ns / 1e6, late_rank, coalesce(late_worker, '?'), late_ns / 1e6)
                              || CASE WHEN len(late_ranks) > 1
                                      THEN printf('; %d ranks %.1f ms or more late: %s', len(late_ranks), min_late_ns / 1e6,
                                                  array_to_string(late_ranks[1:8], ', ') || CASE WHEN len(late_ranks) > 8 THEN ', …' ELSE '' END)
                                      ELSE '' END
           WHEN 'retransmitting' THEN printf('%d of its %d frames retransmitted on its links (%s B); %.1f ms with every rank in, %.1fx the %.1f ms of clean ones',
                                             retransmissions, frames, format('{:,}', retransmitted_bytes), joined_ns / 1e6,
                                             joined_ns / reference_joined_ns, reference_joined_ns / 1e6)
           WHEN 'small message' THEN printf('%d B message: %.2f ms of per-message overheads', bytes, duration_ns / 1e6)
           WHEN 'no packets' THEN 'no packets of its links were captured: the wire cannot be judged'
           WHEN 'NIC congested' THEN printf('no packets; %s''s NIC sent at %.3g Gbit/s (%.0f%% of its peak %.3g) while its CNP and PFC counters rose by %d',
                                            link_src, link_gbps, 100 * link_gbps / link_peak_gbps, link_peak_gbps, nic_signals)
           WHEN 'slow link' THEN printf('%s→%s ran at %.3g Gbit/s while busy, %.0f%% of the other links'' %.3g Gbit/s',
                                        link_src, link_dst, link_gbps, 100 * link_gbps / others_gbps, others_gbps)
           WHEN 'saturated' THEN printf('%s→%s busy %.0f%% of the %.1f ms with every rank in, at %.3g Gbit/s (its peak %.3g)',
                                        link_src, link_dst, 100 * link_busy_ns / joined_ns, joined_ns / 1e6, link_gbps,
                                        link_peak_gbps)
           ELSE printf('the busiest link %s→%s was busy %.1f of the %.1f ms with every rank in',
                       coalesce(link_src, '?'), coalesce(link_dst, '?'), coalesce(link_busy_ns, 0) / 1e6, joined_ns / 1e6)
       END AS reason
FROM linked
ORDER BY run, source, comm, seq;


CREATE OR REPLACE VIEW collective_verdicts_of AS
WITH every_collective_on_the_wire AS (SELECT * FROM collective_wire)
SELECT * FROM collective_verdicts_of(wire := 'every_collective_on_the_wire');
