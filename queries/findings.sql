-- The findings of each run, ranked by the time they cost: a claim, its numbers, and the query that shows it.
--
-- What `tracecore explain` prints: each line a finding of one run, with the exact `tracecore query …`
-- that shows the evidence.
-- Kind: answer
-- Key: run, rank
-- Headline: finding, cost_ns, claim, evidence
-- Partition: none
--
-- Not split by run on a Dask cluster: what loss did to training time compares a run with other runs
-- (train_duration). Each finding is a problem, ranked by cost_ns (the time it cost, where that can be
-- measured; unmeasured ones after), or a note (where the collectives' time went, the slowest
-- collective, links that carry bytes no collective explains). A finding below its threshold is not
-- listed. The collectives' findings read one source per run: the one that recorded the most
-- instances (ties: by name), so a collective recorded by both the PyTorch trace and an NCCL plugin
-- counts once. A cost's share is taken of the run's collective time: the sum of its source's
-- collectives' durations.
-- A systematic finding holds for at least min_count_share of the run's collectives of at least
-- latency_bytes (one hiccup is no straggler), and its cost is at least min_share of the collective time:
--   straggler          a rank with the verdict straggler (the last rank) in min_count_share of the
--                      collectives: cost Σ late_ns (the time the other ranks waited for it)
--   start skew         where no rank is a straggler, the collectives whose verdict is straggler
--                      (min_count_share of them): cost Σ spread_ns
--   slow link          a link whose slowness made collectives network-bound (collective_verdicts' rule
--                      'slow link', or 'saturated') in min_count_share of them: cost Σ joined_ns
--   congested NIC      a run without packets: a worker whose NIC ran near its peak while its CNP or PFC
--                      counters rose (collective_verdicts' rule 'NIC congested') in min_count_share of
--                      them: cost Σ joined_ns
--   retransmitting     collectives that retransmitted and took ≥ slow_factor × the clean ones: cost
--                      Σ (joined_ns − the clean median); ≥ min_share
--   slowest collective note: each run's slowest collective of at least latency_bytes, with its
--                      verdict and step: cost its duration − the median duration of its operation and
--                      size
--   collective time    note: the shares of the collectives' time by verdict
--   exposed communication   step_breakdown's exposed communication over the profiled steps, per
--                      worker: cost the workers' mean Σ exposed_ns; listed when a worker's is
--                      ≥ exposed_share of its steps' GPU time
--   gpu idle           step_breakdown's GPU idle time (no kernel, copy or set) over the steps' GPU
--                      span, per worker: cost the workers' mean Σ gpu_idle_ns; listed when a worker's
--                      is ≥ idle_share of that span
--   retransmissions    per directed worker link, tcp_health's retransmissions when ≥ retrans_share of
--                      its data segments and ≥ min_retransmissions (no cost: TCP's recovery time is not
--                      measured per segment)
--   zero window        per directed worker link, the receiver advertised a zero window (tcp_health)
--   rtt                note: a worker link whose median RTT is ≥ rtt_factor × the run's lowest link's
--   held link          contention's held windows per link (contention's own thresholds), links under
--                      minor_link_share of the busiest link's bytes left out: cost their time
--   topology           nccl_topology's verdict false, or logs not paired with their worker's capture
--   clock              collective_clock_check failures: the sources' times cannot be trusted
--   missing capture    fewer workers captured than the run name says, ranks without a worker, or a
--                      worker whose capture holds no packets (a run without captures has no such finding)
--   unexplained bytes  note: collective_coverage's matched share below coverage_min on a link
--   loss               train_duration: a lossy run's training time over its 0 %-loss baseline's: cost
--                      the difference; listed when ≥ 1 + min_share × the baseline
-- Run names in `evidence` are quoted for a POSIX shell where they need it.
--
-- Parameters:
--   runs            list of run names; NULL = every run
--   min_share       a cost's least share of the collective time (or of the baseline) to be listed (default 0.05); range [0, 1]
--   min_count_share the least share of the collectives a systematic finding holds for (default 0.5); range [0, 1]
--   exposed_share   the least exposed share of the steps for a finding (default 0.2); range [0, 1]
--   idle_share      the least GPU idle share of the steps' GPU span for a finding (default 0.2); range [0, 1]
--   retrans_share   the least retransmitted share of a link's data segments, and of a collective's
--                   frames for collective_verdicts' retransmitting rule (default 0.005)
--   min_retransmissions   the least retransmitted segments of a link for a finding (default 10); range [0, ∞), a whole number
--   rtt_factor      a link's median RTT over the run's lowest link median for a note (default 10); range [1, ∞)
--   coverage_min    a link's matched share below this is noted (default 0.9); range [0, 1]
--   minor_link_share   held windows of a link that carried less than this share of the run's busiest
--                   link's bytes are not listed (links that carry only ACKs; default 0.25); range [0, 1]
--   straggler_share, min_late_ns, latency_bytes, slow_link_share, busy_share, peak_share, slow_factor,
--   idle_ns         collective_verdicts' thresholds (same defaults)
--   wire, health, steps   names of rows a caller already has (a table, view or common table expression:
--                   DuckDB's query_table) with the columns of collective_wire, tcp_health and
--                   step_breakdown for these runs and defaults (the report shares its own); NULL
--                   (default): computed here
-- Columns:
--   run
--   rank          1, 2, … within the run: problems by cost (unmeasured ones after), then notes
--   severity      'problem' | 'note'
--   finding       the kind of finding (above)
--   subject       what it is about: a rank and worker, a directed link, a collective, the run
--   cost_ns       the time it cost, ns; NULL where not measured
--   claim         one line: the claim with its numbers
--   evidence      the tracecore command that shows the rows behind it
CREATE OR REPLACE MACRO findings(runs := NULL, min_share := 0.05, min_count_share := 0.5, exposed_share := 0.2,
    idle_share := 0.2, retrans_share := 0.005, min_retransmissions := 10, rtt_factor := 10, coverage_min := 0.9,
    minor_link_share := 0.25, straggler_share := 0.5, min_late_ns := 1000000, latency_bytes := 65536,
    slow_link_share := 0.5, busy_share := 0.7, peak_share := 0.7, slow_factor := 1.5, idle_ns := 1000000,
    wire := NULL, health := NULL, steps := NULL) AS TABLE
WITH
chosen AS MATERIALIZED (
    SELECT run,
           CASE WHEN regexp_full_match(run, '[A-Za-z0-9_.,:=+@%/-]+') THEN run
                ELSE '''' || replace(run, '''', '''"''"''') || '''' END AS q,
           n_workers
    FROM run_meta
    WHERE runs IS NULL OR list_contains(runs, run)
),
findings_wire AS MATERIALIZED (  -- the collectives on the wire, once for the three views that judge them
    SELECT * FROM collective_wire(runs := runs, idle_ns := idle_ns) WHERE wire IS NULL
    UNION ALL BY NAME
    SELECT * FROM query_table(coalesce(wire, 'collective_wire'))
    WHERE wire IS NOT NULL AND (runs IS NULL OR list_contains(runs, run))
),
verdicts AS MATERIALIZED (
    SELECT *
    FROM collective_verdicts_of(wire := 'findings_wire', runs := runs, straggler_share := straggler_share,
                                min_late_ns := min_late_ns, latency_bytes := latency_bytes,
                                slow_link_share := slow_link_share, busy_share := busy_share,
                                peak_share := peak_share, slow_factor := slow_factor, retrans_share := retrans_share)
),
primary_source AS (
    SELECT run, source, n
    FROM (SELECT run, source, count(*) AS n, row_number() OVER (PARTITION BY run ORDER BY count(*) DESC, source) AS k
          FROM verdicts GROUP BY run, source)
    WHERE k = 1
),
v AS MATERIALIZED (
    SELECT v.*, c.q, median(v.duration_ns) OVER (PARTITION BY v.run, v.op, v.bytes) AS kind_median_ns
    FROM verdicts AS v
    JOIN primary_source USING (run, source)
    JOIN chosen AS c USING (run)
),
span AS MATERIALIZED (  -- the run's collective time: the sum of its source's collectives' durations
    SELECT run, any_value(source) AS source, any_value(q) AS q, count(*) AS n, sum(duration_ns) AS span_ns,
           -- the collectives a systematic finding must hold for min_count_share of (set-up ones are small)
           greatest(count(*) FILTER (WHERE bytes >= latency_bytes), 1) AS n_big
    FROM v GROUP BY run
),
straggler AS (
    SELECT v.run, 'problem' AS severity, 'straggler' AS finding,
           printf('rank %d (%s)', v.late_rank, coalesce(any_value(v.late_worker), '?')) AS subject,
           sum(v.late_ns)::BIGINT AS cost_ns,
           printf('rank %d (%s) started %d of %d collectives last, %.1f ms after the other ranks'' median start '
                  || '(median; max %.1f ms): they waited for it %.0f ms in all', v.late_rank,
                  coalesce(any_value(v.late_worker), '?'), count(*), any_value(s.n), median(v.late_ns) / 1e6,
                  max(v.late_ns) / 1e6, sum(v.late_ns) / 1e6) AS claim,
           'tracecore query collective_verdicts --run ' || any_value(s.q) AS evidence
    FROM v JOIN span AS s USING (run)
    WHERE v.rule = 'late rank'
    GROUP BY v.run, v.late_rank
    HAVING count(*) >= min_count_share * any_value(s.n_big) AND sum(v.late_ns) >= min_share * any_value(s.span_ns)
),
skew AS (  -- late ranks that take turns: no one of them is a straggler, together they cost time
    SELECT v.run, 'problem' AS severity, 'start skew' AS finding, 'ranks' AS subject,
           sum(v.spread_ns)::BIGINT AS cost_ns,
           printf('in %d of %d collectives the first rank waited for the last to start, %.1f ms (median; max '
                  || '%.1f ms), %.0f ms in all; last: %s', count(*), any_value(s.n), median(v.spread_ns) / 1e6,
                  max(v.spread_ns) / 1e6, sum(v.spread_ns) / 1e6, any_value(l.last)) AS claim,
           'tracecore query collective_verdicts --run ' || any_value(s.q) AS evidence
    FROM v
    JOIN span AS s USING (run)
    JOIN (SELECT run, string_agg(printf('rank %d (%s) %d×', late_rank, w, k), ', ' ORDER BY k DESC, late_rank) AS last
          FROM (SELECT run, late_rank, coalesce(any_value(late_worker), '?') AS w, count(*) AS k
                FROM v WHERE rule = 'late rank' GROUP BY run, late_rank)
          GROUP BY run) AS l USING (run)
    WHERE v.rule = 'late rank' AND v.run NOT IN (SELECT run FROM straggler)
    GROUP BY v.run
    HAVING count(*) >= min_count_share * any_value(s.n_big) AND sum(v.spread_ns) >= min_share * any_value(s.span_ns)
),
slow_link AS (
    SELECT v.run, 'problem' AS severity, 'slow link' AS finding, v.link_src || '→' || v.link_dst AS subject,
           sum(v.joined_ns)::BIGINT AS cost_ns,
           CASE WHEN bool_or(v.rule = 'slow link')
                THEN printf('%s→%s held %d of %d collectives: %.3g Gbit/s while busy (median), %.0f%% of the other '
                            || 'links'' %.3g Gbit/s; they spent %.0f ms with every rank in', v.link_src, v.link_dst,
                            count(*), any_value(s.n), median(v.link_gbps),
                            100 * median(v.link_gbps) / median(v.others_gbps), median(v.others_gbps),
                            sum(v.joined_ns) / 1e6)
                ELSE printf('%s→%s was saturated in %d of %d collectives: busy %.0f%% of their time at %.3g Gbit/s '
                            || '(median), %.0f ms in all', v.link_src, v.link_dst, count(*), any_value(s.n),
                            100 * median(v.link_busy_share), median(v.link_gbps), sum(v.joined_ns) / 1e6)
           END AS claim,
           'tracecore query collective_verdicts --run ' || any_value(s.q) AS evidence
    FROM v JOIN span AS s USING (run)
    WHERE v.rule IN ('slow link', 'saturated')
    GROUP BY v.run, v.link_src, v.link_dst
    HAVING count(*) >= min_count_share * any_value(s.n_big) AND sum(v.joined_ns) >= min_share * any_value(s.span_ns)
),
congested_nic AS (
    SELECT v.run, 'problem' AS severity, 'congested NIC' AS finding, v.link_src AS subject,
           sum(v.joined_ns)::BIGINT AS cost_ns,
           printf('%s''s NIC ran at %.0f%% of its peak (median) while its CNP or PFC counters rose, in %d of %d '
                  || 'collectives: %.0f ms with every rank in', v.link_src,
                  100 * median(v.link_gbps / v.link_peak_gbps), count(*), any_value(s.n), sum(v.joined_ns) / 1e6)
               AS claim,
           'tracecore query collective_verdicts --run ' || any_value(s.q) AS evidence
    FROM v JOIN span AS s USING (run)
    WHERE v.rule = 'NIC congested'
    GROUP BY v.run, v.link_src
    HAVING count(*) >= min_count_share * any_value(s.n_big) AND sum(v.joined_ns) >= min_share * any_value(s.span_ns)
),
resending AS (
    SELECT v.run, 'problem' AS severity, 'retransmitting' AS finding, 'collectives' AS subject,
           sum(v.joined_ns - v.reference_joined_ns)::BIGINT AS cost_ns,
           printf('%d of %d collectives retransmitted (%d segments) and took up to %.0f ms with every rank in, '
                  || '%.1fx the %.1f ms of the clean ones', count(*), any_value(s.n), sum(v.retransmissions),
                  max(v.joined_ns) / 1e6, max(v.joined_ns) / median(v.reference_joined_ns),
                  median(v.reference_joined_ns) / 1e6) AS claim,
           'tracecore query collective_verdicts --run ' || any_value(s.q) AS evidence
    FROM v JOIN span AS s USING (run)
    WHERE v.rule = 'retransmitting'
    GROUP BY v.run
    HAVING sum(v.joined_ns - v.reference_joined_ns) >= min_share * any_value(s.span_ns)
),
slowest AS (
    SELECT run, 'note' AS severity,
           'slowest collective' AS finding, printf('%s seq %d', op, seq) AS subject,
           (duration_ns - kind_median_ns)::BIGINT AS cost_ns,
           printf('%s #%d (%s B%s) took %.1f ms, %.2fx the median %.1f ms of its kind: %s — %s', op, seq,
                  format('{:,}', bytes), CASE WHEN step IS NULL THEN '' ELSE printf(', step %d', step) END,
                  duration_ns / 1e6, duration_ns / kind_median_ns, kind_median_ns / 1e6,
                  coalesce(verdict, 'wire not judged'), reason) AS claim,
           'tracecore query collective_verdicts --run ' || q AS evidence
    FROM (SELECT *, row_number() OVER (PARTITION BY run ORDER BY duration_ns DESC, seq) AS k
          FROM v WHERE bytes >= latency_bytes)
    WHERE k = 1
),
shares AS (
    SELECT v.run, 'note' AS severity, 'collective time' AS finding, s.source AS subject, NULL::BIGINT AS cost_ns,
           printf('%d collectives of %s: %s of their time', s.n, s.source,
                  string_agg(printf('%s %.0f%%', coalesce(v.verdict, 'wire not judged'), 100 * v.t / s.span_ns), ', '
                             ORDER BY v.t DESC, v.verdict)) AS claim,
           'tracecore query collective_verdicts --run ' || s.q AS evidence
    FROM (SELECT run, verdict, sum(duration_ns) AS t FROM v GROUP BY run, verdict) AS v
    JOIN span AS s USING (run)
    GROUP BY v.run, s.source, s.n, s.span_ns, s.q
),
steps AS MATERIALIZED (
    SELECT b.*, c.q
    FROM (
        SELECT * FROM step_breakdown(runs := runs, idle_ns := idle_ns) WHERE steps IS NULL
        UNION ALL BY NAME
        SELECT * FROM query_table(coalesce(steps, 'step_breakdown')) WHERE steps IS NOT NULL
    ) AS b
    JOIN chosen AS c USING (run)
),
per_worker AS (  -- each worker's profiled steps: exposed communication and GPU idle over the steps' GPU span
    SELECT run, worker, any_value(q) AS q, count(*) AS n_steps, sum(step_ns) AS step_ns,
           sum(exposed_ns) AS exposed_ns, sum(gpu_idle_ns) AS gpu_idle, sum(iteration_ns) AS iteration_ns
    FROM steps
    GROUP BY run, worker
),
exposed AS (
    SELECT run, 'problem' AS severity, 'exposed communication' AS finding, 'workers' AS subject,
           avg(exposed_ns)::BIGINT AS cost_ns,
           printf('communication nothing hid took %.0f%% of the profiled steps'' GPU time (%.1f ms a worker over '
                  || '%d steps; %s): the GPUs waited on collectives', 100 * sum(exposed_ns) / sum(step_ns),
                  avg(exposed_ns) / 1e6, max(n_steps),
                  string_agg(printf('%s %.0f%%', worker, 100 * exposed_ns / step_ns), ', '
                             ORDER BY exposed_ns / step_ns DESC, worker)) AS claim,
           'tracecore query step_breakdown --run ' || any_value(q) AS evidence
    FROM per_worker
    WHERE exposed_ns IS NOT NULL
    GROUP BY run
    HAVING max(exposed_ns / step_ns) >= exposed_share
),
idle AS (
    SELECT run, 'problem' AS severity, 'gpu idle' AS finding, 'workers' AS subject, avg(gpu_idle)::BIGINT AS cost_ns,
           printf('the GPUs ran nothing %.0f%% of the profiled steps'' GPU span (%.1f ms a worker over %d steps; '
                  || '%s) and %.0f%% of their wall time', 100 * sum(gpu_idle) / sum(step_ns), avg(gpu_idle) / 1e6,
                  max(n_steps),
                  string_agg(printf('%s %.0f%%', worker, 100 * gpu_idle / step_ns), ', '
                             ORDER BY gpu_idle / step_ns DESC, worker),
                  100 * (1 - sum(step_ns - gpu_idle) / sum(iteration_ns))) AS claim,
           'tracecore query step_breakdown --run ' || any_value(q) AS evidence
    FROM per_worker
    WHERE gpu_idle IS NOT NULL AND iteration_ns IS NOT NULL
    GROUP BY run
    HAVING max(gpu_idle / step_ns) >= idle_share
),
health AS MATERIALIZED (
    SELECT h.run, h.src_worker, h.dst_worker, sum(h.data_packets) AS data_packets,
           sum(h.retransmissions) AS retransmissions, sum(h.retransmitted_bytes) AS retransmitted_bytes,
           sum(h.zero_window) AS zero_window, median(h.rtt_median_us) AS rtt_us
    FROM (
        SELECT * FROM tcp_health(runs := runs) WHERE health IS NULL
        UNION ALL BY NAME
        SELECT * FROM query_table(coalesce(health, 'tcp_health')) WHERE health IS NOT NULL
    ) AS h
    JOIN chosen USING (run)
    WHERE h.src_worker IS NOT NULL AND h.dst_worker IS NOT NULL
    GROUP BY h.run, h.src_worker, h.dst_worker
),
resent AS (
    SELECT h.run, 'problem' AS severity, 'retransmissions' AS finding, h.src_worker || '→' || h.dst_worker AS subject,
           NULL::BIGINT AS cost_ns,
           printf('%s→%s retransmitted %s segments (%.2f%% of its %s data segments, %s B)', h.src_worker,
                  h.dst_worker, format('{:,}', h.retransmissions), 100 * h.retransmissions / h.data_packets,
                  format('{:,}', h.data_packets), format('{:,}', h.retransmitted_bytes)) AS claim,
           'tracecore query tcp_health --run ' || c.q AS evidence
    FROM health AS h JOIN chosen AS c USING (run)
    WHERE h.retransmissions >= min_retransmissions AND h.retransmissions >= retrans_share * h.data_packets
),
zero AS (
    SELECT h.run, 'problem' AS severity, 'zero window' AS finding, h.src_worker || '→' || h.dst_worker AS subject,
           NULL::BIGINT AS cost_ns,
           printf('%s advertised a zero window to %s %d time%s: it could not take data as fast as %s sent it',
                  h.src_worker, h.dst_worker, h.zero_window, CASE WHEN h.zero_window = 1 THEN '' ELSE 's' END,
                  h.dst_worker) AS claim,
           'tracecore query tcp_health --run ' || c.q AS evidence
    FROM health AS h JOIN chosen AS c USING (run)
    WHERE h.zero_window > 0
),
rtt AS (
    SELECT h.run, 'note' AS severity, 'rtt' AS finding, h.src_worker || '→' || h.dst_worker AS subject,
           NULL::BIGINT AS cost_ns,
           printf('%s→%s: median RTT %.0f µs, %.0fx the run''s lowest link median (%.0f µs)', h.src_worker,
                  h.dst_worker, h.rtt_us, h.rtt_us / h.low_us, h.low_us) AS claim,
           'tracecore query tcp_health --run ' || c.q AS evidence
    FROM (SELECT *, min(rtt_us) OVER (PARTITION BY run) AS low_us FROM health) AS h
    JOIN chosen AS c USING (run)
    WHERE h.low_us > 0 AND h.rtt_us >= rtt_factor * h.low_us
),
links AS MATERIALIZED (  -- bytes per directed worker link, to leave out links that carry only ACKs
    SELECT run, src_worker, dst_worker, sum(bytes) AS bytes,
           max(sum(bytes)) OVER (PARTITION BY run) AS top_bytes
    FROM flow_matrix(runs := runs)
    WHERE src_worker IS NOT NULL AND dst_worker IS NOT NULL
    GROUP BY run, src_worker, dst_worker
),
held_windows AS (  -- contention's windows (its float seconds rounded: a window comes once)
    SELECT DISTINCT h.run, h.src_worker, h.dst_worker, round(h.held_start_s, 6) AS a, round(h.held_end_s, 6) AS b,
           h.held_ratio, h.reference_gbps
    FROM contention(runs := runs, held_only := true) AS h
    JOIN links AS l USING (run, src_worker, dst_worker)
    WHERE l.bytes >= minor_link_share * l.top_bytes
),
held AS (
    SELECT h.run, 'problem' AS severity, 'held link' AS finding, h.src_worker || '→' || h.dst_worker AS subject,
           round(sum(h.b - h.a) * 1e9)::BIGINT AS cost_ns,
           printf('%s→%s was held below 0.8 of its steady %.3g Gbit/s for %.2f s in %d window%s (at %.0f%% of it)',
                  h.src_worker, h.dst_worker, any_value(h.reference_gbps), sum(h.b - h.a), count(*),
                  CASE WHEN count(*) = 1 THEN '' ELSE 's' END, 100 * avg(h.held_ratio)) AS claim,
           'tracecore query contention -p held_only=true --run ' || any_value(c.q) AS evidence
    FROM held_windows AS h JOIN chosen AS c USING (run)
    GROUP BY h.run, h.src_worker, h.dst_worker
),
topology AS (
    SELECT t.run, 'problem' AS severity, 'topology' AS finding, any_value(t.algorithm) AS subject,
           NULL::BIGINT AS cost_ns,
           CASE WHEN bool_or(t.verdict = false)
                THEN printf('NCCL''s declared %s and the wire disagree on %d edge%s: %s', any_value(t.algorithm),
                            count(*) FILTER (WHERE t.contradicts),
                            CASE WHEN count(*) FILTER (WHERE t.contradicts) = 1 THEN '' ELSE 's' END,
                            coalesce(string_agg(DISTINCT printf('%s→%s %s', t.src_worker, t.dst_worker, t.status), '; ')
                                         FILTER (WHERE t.contradicts), 'see the rank problems'))
                ELSE printf('NCCL logs not paired with their workers'' captures: %s', any_value(t.rank_problems))
           END AS claim,
           'tracecore query nccl_topology --run ' || any_value(c.q) AS evidence
    FROM nccl_topology(runs := runs) AS t JOIN chosen AS c USING (run)
    GROUP BY t.run
    HAVING bool_or(t.verdict = false) OR bool_or(t.rank_problems IS NOT NULL AND t.rank_problems <> '')
),
clock AS (
    SELECT k.run, 'problem' AS severity, 'clock' AS finding, printf('%s rank %d', k.source, k.rank) AS subject,
           NULL::BIGINT AS cost_ns, k.message AS claim,
           'tracecore query collective_clock_check --run ' || c.q AS evidence
    FROM collective_clock_check_of(wire := 'findings_wire', runs := runs) AS k JOIN chosen AS c USING (run)
    WHERE NOT k.ok
),
captured AS (
    SELECT c.run, c.q, c.n_workers, count(w.worker) AS workers
    FROM chosen AS c LEFT JOIN workers AS w USING (run)
    GROUP BY c.run, c.q, c.n_workers
),
missing AS (
    SELECT run, 'problem' AS severity, 'missing capture' AS finding, 'workers' AS subject, NULL::BIGINT AS cost_ns,
           printf('the run''s name says %d workers; %d were captured: the views see only their links', n_workers,
                  workers) AS claim,
           'tracecore query run_summary --run ' || q AS evidence
    FROM captured
    WHERE n_workers > workers
    UNION ALL
    SELECT k.run, 'problem', 'missing capture', printf('%s rank %d', k.source, k.rank), NULL::BIGINT,
           printf('rank %d of %s (%s) has no worker: no capture named worker-%d-… and no NCCL log pairs it',
                  k.rank, k.source, k.file, k.rank),
           'tracecore query collective_coverage --run ' || c.q
    FROM (SELECT DISTINCT run, source, rank, file FROM collective_calls WHERE worker IS NULL) AS k
    JOIN chosen AS c USING (run)
    UNION ALL
    SELECT w.run, 'problem', 'missing capture', w.worker, NULL::BIGINT,
           printf('%s''s capture %s holds no packets: its links are not seen', w.worker, w.capture),
           'tracecore query run_summary --run ' || c.q
    FROM workers AS w JOIN chosen AS c USING (run)
    WHERE w.packets = 0 AND w.n_files > 0  -- a run without captures (traces or counters alone) is not missing one
),
unexplained AS (
    SELECT u.run, 'note' AS severity, 'unexplained bytes' AS finding, u.src_worker || '→' || u.dst_worker AS subject,
           NULL::BIGINT AS cost_ns,
           printf('%s→%s: %.0f%% of its payload in %s''s span (%s of %s B) belongs to no recorded collective',
                  u.src_worker, u.dst_worker, 100 * (1 - u.matched_share), u.source,
                  format('{:,}', u.payload_bytes - u.matched_bytes), format('{:,}', u.payload_bytes)) AS claim,
           'tracecore query collective_coverage --run ' || c.q AS evidence
    FROM collective_coverage_of(wire := 'findings_wire', runs := runs) AS u
    JOIN primary_source AS p USING (run, source)
    JOIN chosen AS c USING (run)
    WHERE u.matched_share < coverage_min
),
lossy AS (
    SELECT d.run, 'problem' AS severity, 'loss' AS finding, printf('%g %% loss', d.loss_pct) AS subject,
           round((d.duration_s - d.baseline_s) * 1e9)::BIGINT AS cost_ns,
           printf('%g %% loss: training took %.2f s, %.2fx the %.2f s of the same configuration at 0 %% loss '
                  || '(%d run%s)', d.loss_pct, d.duration_s, d.normalized, d.baseline_s, d.baseline_runs,
                  CASE WHEN d.baseline_runs = 1 THEN '' ELSE 's' END) AS claim,
           'tracecore query train_duration' AS evidence
    FROM train_duration(runs := runs) AS d
    WHERE d.loss_pct > 0 AND d.baseline_s > 0 AND d.normalized >= 1 + min_share
),
found AS (
    SELECT * FROM straggler UNION ALL BY NAME SELECT * FROM skew
    UNION ALL BY NAME SELECT * FROM slow_link UNION ALL BY NAME SELECT * FROM congested_nic
    UNION ALL BY NAME SELECT * FROM resending
    UNION ALL BY NAME SELECT * FROM slowest UNION ALL BY NAME SELECT * FROM shares
    UNION ALL BY NAME SELECT * FROM exposed UNION ALL BY NAME SELECT * FROM idle
    UNION ALL BY NAME SELECT * FROM resent
    UNION ALL BY NAME SELECT * FROM zero UNION ALL BY NAME SELECT * FROM rtt
    UNION ALL BY NAME SELECT * FROM held UNION ALL BY NAME SELECT * FROM topology
    UNION ALL BY NAME SELECT * FROM clock UNION ALL BY NAME SELECT * FROM missing
    UNION ALL BY NAME SELECT * FROM unexplained UNION ALL BY NAME SELECT * FROM lossy
)
SELECT run,
       row_number() OVER (PARTITION BY run ORDER BY severity = 'note', cost_ns DESC NULLS LAST, finding, subject)
           AS rank,
       severity, finding, subject, cost_ns, coalesce(claim, finding) AS claim, evidence
FROM found
ORDER BY run, rank;

CREATE OR REPLACE VIEW findings AS SELECT * FROM findings();
