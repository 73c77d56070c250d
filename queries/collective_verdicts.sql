-- Each recorded collective: what its time went to — a late rank, the network, compute or latency.
--
-- The cause verdict of a collective, by documented rules whose thresholds are this view's parameters.
-- Kind: answer
-- Key: run, source, seq, op
-- Headline: verdict, reason, duration_ns, late_rank, link_src, link_dst
-- Needs: collectives
-- Partition: run
--
-- A collective instance (run, source, comm, seq) lasts from its first rank's start to its last rank's
-- end (duration_ns), on one clock (collective_calls: the hosts' offsets applied). It cannot finish
-- before its last rank joins, so that time splits into the wait for the last rank (spread_ns) and the
-- time after every rank joined (joined_ns). The wire: collective_wire's bytes, busy time (gaps
-- between the collective's frames of at most idle_ns) and re-sent frames of each directed link. The
-- verdict is the first rule that holds:
--   straggler       the last rank started late_ns ≥ min_late_ns after the median start of the
--                   others, and the spread is ≥ straggler_share of the duration (the others waited
--                   for it most of the collective)
--   network         retransmitting: at least retrans_share of its frames (≥ 1) on its links re-sent
--                   bytes sent before (collective_wire's resent_frames) and its joined time is
--                   ≥ slow_factor × the median joined time of the run's instances of the same source,
--                   operation and size that did not (all of them when none is clean)
--   latency         a message under latency_bytes: per-message overheads, not bandwidth
--   network         slow link: the slowest link's rate while busy (bytes·8 / busy_ns) is
--                   ≤ slow_link_share × the median rate of the collective's other links (it held the
--                   ring: its peers sent as fast as they were fed)
--   network         saturated: the busiest link was busy ≥ busy_share of the joined time at a rate
--                   ≥ peak_share × its own peak (the fastest it ran in any of the run's
--                   collectives of the source)
--   compute/launch  otherwise: the wire was idle most of the time every rank was in the collective
--                   (kernel launch, reduction, copies, the proxy thread)
--   NULL            no packets of its links (a run without captures): the wire cannot be judged;
--                   straggler and latency still can
-- Links with fewer than latency_bytes are left out of the rates (a tree link that carries a flag).
-- A collective recorded by several sources (the PyTorch trace and an NCCL plugin) has a row per
-- source; collective_verdicts' own rows for one source are independent of the others'.
--
-- Parameters:
--   runs              list of run names; NULL = every run
--   straggler_share   the spread's least share of the duration for a straggler (default 0.5)
--   min_late_ns       the least lateness of a straggler, ns (default 1 000 000 = 1 ms)
--   latency_bytes     messages below this are latency-bound, bytes (default 65 536)
--   slow_link_share   a link at most this share of the others' median rate is slow (default 0.5)
--   busy_share        the least busy share of the joined time for a saturated link (default 0.7)
--   peak_share        the least share of the link's peak rate for a saturated link (default 0.7)
--   slow_factor       the least slowdown over clean instances for a retransmitting one (default 1.5)
--   retrans_share     the least share of its frames retransmitted for a retransmitting one (default 0.005)
--   idle_ns           a longer gap between frames is idle time, ns (default 1 000 000 = 1 ms)
-- Columns:
--   run, source, comm, seq, op, step   the collective instance (step: the source's or training log's)
--   bytes                  the message, bytes
--   ranks                  ranks that recorded it
--   start_ns, end_ns       first rank's start, last rank's end, UTC ns (runner's clock)
--   duration_ns            end_ns − start_ns, ns
--   spread_ns              last rank's start − first rank's start, ns
--   late_rank, late_worker the rank that started last and its worker
--   late_ns                its start − the median start of the other ranks, ns
--   joined_ns              end_ns − the last rank's start: the time with every rank in it, ns
--   link_src, link_dst     the link the verdict looked at: the slowest for a slow link, else the busiest
--   link_bytes             its bytes (collective_wire), bytes
--   link_busy_ns           its busy time, ns
--   link_busy_share        link_busy_ns / joined_ns
--   link_gbps              its rate while busy, Gbit/s
--   others_gbps            the median rate of the collective's other links while busy, Gbit/s
--   link_peak_gbps         the link's fastest rate in the run's collectives of this source, Gbit/s
--   frames                 frames of the collective on its links (collective_wire), count
--   retransmissions        those that re-sent bytes sent before (collective_wire's resent_frames), count
--   retransmitted_bytes    the re-sent bytes, bytes
--   reference_joined_ns    the median joined time the retransmitting rule compares with, ns
--   verdict                'straggler' | 'network' | 'latency' | 'compute/launch'; NULL, above
--   rule                   which rule: 'late rank' | 'retransmitting' | 'small message' | 'slow link' |
--                          'saturated' | 'wire idle' | 'no packets'
--   reason                 one line for a person: the rule with this collective's numbers
CREATE OR REPLACE MACRO collective_verdicts(runs := NULL, straggler_share := 0.5, min_late_ns := 1000000,
    latency_bytes := 65536, slow_link_share := 0.5, busy_share := 0.7, peak_share := 0.7, slow_factor := 1.5,
    retrans_share := 0.005, idle_ns := 1000000) AS TABLE
WITH
calls AS (
    SELECT run, source, comm, seq, op, bytes, step, rank, worker,
           start_ns - coalesce(clock_offset_ns, 0) AS t0, end_ns - coalesce(clock_offset_ns, 0) AS t1
    FROM collective_calls
    WHERE (runs IS NULL OR list_contains(runs, run)) AND start_ns IS NOT NULL
),
instances AS (
    SELECT run, source, comm, seq, any_value(op) AS op, any_value(bytes) AS bytes, any_value(step) AS step,
           count(*) AS ranks, min(t0) AS start_ns, max(t1) AS end_ns, max(t0) AS last_start_ns,
           arg_max(rank, t0) AS late_rank, arg_max(worker, t0) AS late_worker,
           -- the others: every start but the last, sorted; their median
           list_aggregate(list_slice(list_sort(list(t0)), 1, count(*) - 1), 'median') AS others_start
    FROM calls
    GROUP BY run, source, comm, seq
),
wire AS MATERIALIZED (
    SELECT w.run, w.source, w.comm, w.seq, w.src_worker, w.dst_worker, s.ip AS src_ip, d.ip AS dst_ip,
           w.start_ns, w.end_ns, w.frames, w.bytes, w.resent_frames, w.resent_bytes, w.busy_ns, w.gbps
    FROM collective_wire(runs := runs, idle_ns := idle_ns) AS w
    JOIN workers AS s ON s.run = w.run AND s.worker = w.src_worker
    JOIN workers AS d ON d.run = w.run AND d.worker = w.dst_worker
),
rated AS (  -- the links that carried the message, with their peak over the run's collectives
    SELECT *, max(gbps) OVER (PARTITION BY run, source, src_worker, dst_worker) AS peak_gbps
    FROM wire
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
    FROM wire
    GROUP BY run, source, comm, seq
),
judged AS (
    SELECT i.*, i.end_ns - i.start_ns AS duration_ns, i.last_start_ns - i.start_ns AS spread_ns,
           CASE WHEN i.ranks > 1 THEN (i.last_start_ns - i.others_start)::BIGINT END AS late_ns,
           i.end_ns - i.last_start_ns AS joined_ns,
           l.links IS NOT NULL AS on_wire, coalesce(l.frames, 0) AS frames,
           coalesce(l.retransmissions, 0) AS retransmissions,
           coalesce(l.retransmitted_bytes, 0) AS retransmitted_bytes,
           s.src_worker AS slow_src, s.dst_worker AS slow_dst, s.bytes AS slow_bytes, s.busy_ns AS slow_busy_ns,
           s.gbps AS slow_gbps, s.others_gbps, s.peak_gbps AS slow_peak_gbps,
           b.src_worker AS busy_src, b.dst_worker AS busy_dst, b.bytes AS busy_bytes, b.busy_ns AS busy_busy_ns,
           b.gbps AS busy_gbps, b.peak_gbps AS busy_peak_gbps
    FROM instances AS i
    LEFT JOIN lost AS l ON l.run = i.run AND l.source = i.source AND l.comm IS NOT DISTINCT FROM i.comm AND l.seq = i.seq
    LEFT JOIN slowest AS s ON s.run = i.run AND s.source = i.source AND s.comm IS NOT DISTINCT FROM i.comm AND s.seq = i.seq
    LEFT JOIN busiest AS b ON b.run = i.run AND b.source = i.source AND b.comm IS NOT DISTINCT FROM i.comm AND b.seq = i.seq
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
               WHEN NOT on_wire THEN 'no packets'
               WHEN slow_gbps <= slow_link_share * others_gbps THEN 'slow link'
               WHEN busy_busy_ns >= busy_share * joined_ns AND busy_gbps >= peak_share * busy_peak_gbps THEN 'saturated'
               ELSE 'wire idle'
           END AS rule
    FROM referenced
),
linked AS (
    SELECT *,
           CASE WHEN rule = 'slow link' THEN slow_src ELSE busy_src END AS link_src,
           CASE WHEN rule = 'slow link' THEN slow_dst ELSE busy_dst END AS link_dst,
           CASE WHEN rule = 'slow link' THEN slow_bytes ELSE busy_bytes END AS link_bytes,
           CASE WHEN rule = 'slow link' THEN slow_busy_ns ELSE busy_busy_ns END AS link_busy_ns,
           CASE WHEN rule = 'slow link' THEN slow_gbps ELSE busy_gbps END AS link_gbps,
           CASE WHEN rule = 'slow link' THEN slow_peak_gbps ELSE busy_peak_gbps END AS link_peak_gbps
    FROM ruled
)
SELECT run, source, comm, seq, op, step, bytes, ranks, start_ns, end_ns, duration_ns, spread_ns, late_rank,
       late_worker, late_ns, joined_ns, link_src, link_dst, link_bytes::BIGINT AS link_bytes, link_busy_ns,
       link_busy_ns / nullif(joined_ns, 0) AS link_busy_share, link_gbps, others_gbps, link_peak_gbps,
       frames, retransmissions, retransmitted_bytes, reference_joined_ns::BIGINT AS reference_joined_ns,
       CASE rule
           WHEN 'late rank' THEN 'straggler'
           WHEN 'retransmitting' THEN 'network'
           WHEN 'small message' THEN 'latency'
           WHEN 'slow link' THEN 'network'
           WHEN 'saturated' THEN 'network'
           WHEN 'wire idle' THEN 'compute/launch'
       END AS verdict,
       rule,
       CASE rule
           WHEN 'late rank' THEN printf('the ranks started over %.1f of its %.1f ms, rank %d (%s) last, %.1f ms after the others'' median start',
                                        spread_ns / 1e6, duration_ns / 1e6, late_rank, coalesce(late_worker, '?'), late_ns / 1e6)
           WHEN 'retransmitting' THEN printf('%d of its %d frames retransmitted on its links (%s B); %.1f ms with every rank in, %.1fx the %.1f ms of clean ones',
                                             retransmissions, frames, format('{:,}', retransmitted_bytes), joined_ns / 1e6,
                                             joined_ns / reference_joined_ns, reference_joined_ns / 1e6)
           WHEN 'small message' THEN printf('%d B message: %.2f ms of per-message overheads', bytes, duration_ns / 1e6)
           WHEN 'no packets' THEN 'no packets of its links were captured: the wire cannot be judged'
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

CREATE OR REPLACE VIEW collective_verdicts AS SELECT * FROM collective_verdicts();
