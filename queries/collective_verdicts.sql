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
--   network         NIC congested (a run without packets, with NIC counters: nic_tx): the
--                   NIC of one of its workers whose congestion counters rose during it (CNPs handled
--                   or sent, PFC pauses received) sent at ≥ peak_share × its fastest rate in the run's
--                   collectives of the source; the worker is link_src, link_dst NULL
--   NULL            no packets of its links (a run without captures) and no such NIC: the wire cannot
--                   be judged; straggler and latency still can
-- Links with fewer than latency_bytes are left out of the rates (a tree link that carries a flag).
-- A collective recorded by several sources (the PyTorch trace and an NCCL plugin) has a row per
-- source; collective_verdicts' own rows for one source are independent of the others'.
--
-- Parameters:
--   runs              list of run names; NULL = every run
--   straggler_share   the spread's least share of the duration for a straggler (default 0.5); range [0, 1]
--   min_late_ns       the least lateness of a straggler, ns (default 1 000 000 = 1 ms); range [0, ∞)
--   latency_bytes     messages below this are latency-bound, bytes (default 65 536); range [0, ∞), a whole number
--   slow_link_share   a link at most this share of the others' median rate is slow (default 0.5); range [0, 1]
--   busy_share        the least busy share of the joined time for a saturated link (default 0.7); range [0, 1]
--   peak_share        the least share of the link's peak rate for a saturated link (default 0.7); range [0, 1]
--   slow_factor       the least slowdown over clean instances for a retransmitting one (default 1.5); range [1, ∞)
--   retrans_share     the least share of its frames retransmitted for a retransmitting one (default 0.005); range [0, 1]
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
--   late_ranks             every rank that started min_late_ns or more after that median, the last
--                          first (two stragglers are both named; late_rank alone is the last)
--   joined_ns              end_ns − the last rank's start: the time with every rank in it, ns
--   link_src, link_dst     the link the verdict looked at: the slowest for a slow link, else the busiest
--                          (NIC congested: link_src the worker, link_dst NULL, link_gbps and
--                          link_peak_gbps its NIC's rate over the collective and its peak)
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
--                          'saturated' | 'NIC congested' | 'wire idle' | 'no packets'
--   reason                 one line for a person: the rule with this collective's numbers
CREATE OR REPLACE MACRO collective_verdicts(runs := NULL, straggler_share := 0.5, min_late_ns := 1000000,
    latency_bytes := 65536, slow_link_share := 0.5, busy_share := 0.7, peak_share := 0.7, slow_factor := 1.5,
    retrans_share := 0.005, idle_ns := 1000000) AS TABLE
WITH verdicts_wire AS MATERIALIZED (SELECT * FROM collective_wire(runs := runs, idle_ns := idle_ns))
SELECT *
FROM collective_verdicts_of(wire := 'verdicts_wire', runs := runs, straggler_share := straggler_share,
                            min_late_ns := min_late_ns, latency_bytes := latency_bytes,
                            slow_link_share := slow_link_share, busy_share := busy_share, peak_share := peak_share,
                            slow_factor := slow_factor, retrans_share := retrans_share)
ORDER BY run, source, comm, seq;

CREATE OR REPLACE VIEW collective_verdicts AS SELECT * FROM collective_verdicts();
