-- Per worker and training step: the RDMA port's congestion counters (CNPs, ECN marks, PFC pauses, sequence errors, timeouts).
-- Kind: answer
-- Key: run, worker, step
-- Headline: cnp_sent, cnp_handled, ecn_marked, pfc_pauses_rx
-- Needs: counters
-- Partition: run
--
-- Semantics: the counter sampler's samples (`counters`): each sample's delta goes to the span that
-- holds the sample's time: a logged training step (train_steps: from the previous Batch row to this
-- one), and one row per worker for the whole run (step NULL) that sums every sample. DCQCN's signals
-- from the RoCE port's hw_counters (mlx5 names): np_cnp_sent (CNPs this NIC sent as the notification
-- point, for ECN-marked packets it received), rp_cnp_handled (CNPs it acted on as the reaction point:
-- it slowed down), np_ecn_marked_roce_packets (ECN-CE-marked RoCE packets it received); losses:
-- out_of_sequence and packet_seq_err (packets out of order or lost: go-back-N), local_ack_timeout_err
-- (retransmission timeouts); from the port's counters/: port_xmit_wait (ticks the port had data and
-- no credit: the fabric pushed back), port_xmit_discards; from `ethtool -S`: the per-priority PFC
-- pause frames received and sent (rx_prioN_pause, tx_prioN_pause, summed over priorities). A
-- counter the NIC does not have is NULL, not 0. A worker sampled without an RDMA port has only
-- PFC columns (where ethtool answers).
--
-- Parameters:
--   runs     list of run names; NULL = every run
-- Columns:
--   run, worker          the run and the worker whose sampler file it is
--   step                 the logged step (train_steps' numbering); NULL: the whole run
--   start_ns, end_ns     the span, UTC ns (the whole run: its first and last sample)
--   cnp_sent             CNPs sent (count)
--   cnp_handled          CNPs handled (count)
--   ecn_marked           ECN-marked RoCE packets received (count)
--   pfc_pauses_rx        PFC pause frames received, all priorities (count)
--   pfc_pauses_tx        PFC pause frames sent, all priorities (count)
--   out_of_sequence      packets out of sequence (count)
--   seq_errors           packet sequence errors, NAKs (count)
--   ack_timeouts         local ACK timeouts (count)
--   xmit_wait            port_xmit_wait ticks (count)
--   xmit_discards        port_xmit_discards (count)
CREATE OR REPLACE MACRO roce_congestion(runs := NULL) AS TABLE
WITH kinds AS (
    SELECT run, worker, ts_ns, delta,
           CASE WHEN counter = 'np_cnp_sent' THEN 'cnp_sent'
                WHEN counter = 'rp_cnp_handled' THEN 'cnp_handled'
                WHEN counter = 'np_ecn_marked_roce_packets' THEN 'ecn_marked'
                WHEN source = 'ethtool' AND regexp_matches(counter, '^rx_prio[0-7]_pause$') THEN 'pfc_pauses_rx'
                WHEN source = 'ethtool' AND regexp_matches(counter, '^tx_prio[0-7]_pause$') THEN 'pfc_pauses_tx'
                WHEN counter = 'out_of_sequence' THEN 'out_of_sequence'
                WHEN counter = 'packet_seq_err' THEN 'seq_errors'
                WHEN counter = 'local_ack_timeout_err' THEN 'ack_timeouts'
                WHEN counter = 'port_xmit_wait' THEN 'xmit_wait'
                WHEN counter = 'port_xmit_discards' THEN 'xmit_discards'
           END AS kind
    FROM counters
    WHERE (runs IS NULL OR list_contains(runs, run)) AND source IN ('rdma', 'ethtool')
),
picked AS (SELECT * FROM kinds WHERE kind IS NOT NULL),
spans AS (
    SELECT p.run, p.worker, s.step, s.start_ns, s.end_ns, p.kind, p.delta
    FROM picked AS p
    JOIN train_steps(runs := runs) AS s ON s.run = p.run AND p.ts_ns > s.start_ns AND p.ts_ns <= s.end_ns
    UNION ALL
    SELECT run, worker, NULL, min(ts_ns) OVER w, max(ts_ns) OVER w, kind, delta
    FROM picked
    WINDOW w AS (PARTITION BY run, worker)
)
SELECT run, worker, step, any_value(start_ns) AS start_ns, any_value(end_ns) AS end_ns,
       sum(delta) FILTER (kind = 'cnp_sent') AS cnp_sent,
       sum(delta) FILTER (kind = 'cnp_handled') AS cnp_handled,
       sum(delta) FILTER (kind = 'ecn_marked') AS ecn_marked,
       sum(delta) FILTER (kind = 'pfc_pauses_rx') AS pfc_pauses_rx,
       sum(delta) FILTER (kind = 'pfc_pauses_tx') AS pfc_pauses_tx,
       sum(delta) FILTER (kind = 'out_of_sequence') AS out_of_sequence,
       sum(delta) FILTER (kind = 'seq_errors') AS seq_errors,
       sum(delta) FILTER (kind = 'ack_timeouts') AS ack_timeouts,
       sum(delta) FILTER (kind = 'xmit_wait') AS xmit_wait,
       sum(delta) FILTER (kind = 'xmit_discards') AS xmit_discards
FROM spans
GROUP BY run, worker, step
ORDER BY run, worker, step NULLS FIRST;

CREATE OR REPLACE VIEW roce_congestion AS SELECT * FROM roce_congestion();
