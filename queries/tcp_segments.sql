-- Each TCP packet of a run with tcp_health's classification: retransmission, out-of-order, dup ACK.
-- Kind: building block
-- Partition: run
--
-- tcp_health's rules (see its header) applied packet by packet, so views that need to know *when* a
-- flow retransmitted (collective_verdicts: during which collective) count what tcp_health counts.
-- One row per TCP packet whose header the capture holds; a flow is `flow` = hash(run, src_ip,
-- src_port, dst_ip, dst_port), its reverse `back` (a view joins its own flows' names by that hash).
-- Deterministic: a flow's packets are numbered once per epoch in one order (ts_ns, rel, span, tcp_ack,
-- flags, window; rows equal in all of these are equal in every column used) and every window follows
-- that numbering, so the rows are the same set whatever the thread count or the runs asked for; "the
-- reverse flow's last packet before" is the last in that order of the last earlier timestamp.
--
-- Parameters:
--   runs, from_ns, to_ns, ooo_ns   as tcp_health's
-- Columns:
--   flow, back          the directed flow and its reverse (hash keys)
--   ts_ns               the packet, UTC ns
--   fl, sq, ak, win, shift   TCP flags, sequence and acknowledgment numbers, window, SYN window scale
--   len                 TCP payload, bytes
--   span                len + 1 for SYN and for FIN (the sequence space the packet occupies)
--   epoch               the flow's connection: 0, then 1, 2, … from each SYN or SYN+ACK whose sequence
--                       number is not that of the flow's SYN before it (rows of one microsecond share one)
--   rel                 sequence number unwrapped across 2^32 (an offset of the flow's first packet; 0 steps
--                       from the SYN that starts an epoch); compare it only within an epoch
--   reach               span, less a FIN's 1 after 10,000 segments of a flow without its reverse (tshark)
--   nxt, nxt_ns         the highest sequence end (rel + reach) the flow sent before it, and when the
--                       packet that first reached it was sent
--   last_at_ts          the flow's last packet at its ts_ns (in the order above): the row an as-of
--                       join on ts_ns takes
--   keep_alive          ≤ 1 byte at nxt − 1, no SYN/FIN/RST
--   behind              it starts below nxt (tshark's "sequence not advanced": keep-alives and a
--                       segment of > 1 byte at nxt − 1 excepted)
--   dup_ack, dups       tcp_health's rule; the flow's duplicate ACKs since its ack number last changed,
--                       this packet included
--   spurious_retransmission   payload the reverse flow's last packet before it had acknowledged
--   fast_retransmission       behind, at the ack number of ≥ 2 duplicate ACKs of the reverse flow,
--                             the last of its packets < 20 ms before it
--   ooo                 out-of-order (tcp_health's rule)
--   retransmission      every retransmission tshark flags: spurious, fast, or behind and not
--                       out-of-order
--   sends_of_end        how often the flow sent a segment with this sequence end (Karn)
CREATE OR REPLACE MACRO tcp_segments(runs := NULL, from_ns := NULL, to_ns := NULL, ooo_ns := 3000000) AS TABLE
WITH seg AS (
    -- `flow` keys the directed flow, `back` its reverse: one integer to partition and join on (as
    -- worker_pairs' key: two flows merge only on a 64-bit hash collision)
    SELECT hash(run, src_ip, src_port, dst_ip, dst_port) AS flow, hash(run, dst_ip, dst_port, src_ip, src_port) AS back,
           ts_ns, tcp_flags AS fl, tcp_seq AS sq, tcp_ack AS ak, tcp_window AS win, tcp_window_scale AS shift,
           coalesce(l4_payload_len, 0) AS len,
           coalesce(l4_payload_len, 0) + (tcp_flags & 2 <> 0)::BIGINT + (tcp_flags & 1 <> 0)::BIGINT AS span
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE ip_proto = 6 AND tcp_window IS NOT NULL AND tcp_flags IS NOT NULL
),
restarts AS (
    -- a SYN (or SYN+ACK) whose sequence number is not that of the flow's SYN before it starts the flow
    -- afresh from its microsecond on (an epoch): a new connection on the same ports (tshark: "port
    -- numbers reused"), or the SYN+ACK of a SYN sent again after the RST (sequence number 0) that
    -- refused it; nothing the flow sent before is `next` for it
    SELECT flow, ts_ns, row_number() OVER (PARTITION BY flow ORDER BY ts_ns) AS epoch
    FROM (
        SELECT DISTINCT flow, ts_ns FROM (
            SELECT flow, ts_ns, sq, lag(sq) OVER (PARTITION BY flow ORDER BY ts_ns, sq) AS prev
            FROM seg WHERE fl & 2 = 2
        ) WHERE prev IS DISTINCT FROM sq
    )
),
stepped AS (
    -- the signed 32-bit step of the sequence number from the flow's previous packet in (time, raw
    -- number) order: their sum is the unwrapped number whatever the order within a timestamp, as long
    -- as neighbours lie less than 2^31 apart; 0 where an epoch starts. `alone`: no packet of the
    -- reverse flow is in the dataset
    SELECT s.*, coalesce(r.epoch, 0) AS epoch, v.flow IS NULL AS alone,
           CASE WHEN r.ts_ns = s.ts_ns AND s.fl & 2 = 2 THEN 0
                ELSE (s.sq::BIGINT + 6442450944
                      - coalesce(lag(s.sq) OVER (PARTITION BY s.flow ORDER BY s.ts_ns, s.sq), s.sq)::BIGINT)
                     % 4294967296 - 2147483648
           END AS step
    FROM seg AS s
    ASOF LEFT JOIN restarts AS r ON r.flow = s.flow AND r.ts_ns <= s.ts_ns
    LEFT JOIN (SELECT DISTINCT flow FROM seg) AS v ON v.flow = s.back
),
unwrapped AS (
    -- rows of one time and number are peers of the sums (RANGE): one value, whichever took the step
    SELECT * EXCLUDE (step, alone, sent),
           -- tshark keeps at most 10,000 segments no ACK of the reverse flow has removed, and a SYN or
           -- FIN beyond them moves `next` by its payload only: so a flow's FIN after 10,000 segments
           -- where the dataset has no reverse flow (an approximation: with it, none nears 10,000)
           span - (fl & 1 <> 0 AND alone AND sent > 10000)::BIGINT AS reach
    FROM (
        SELECT *, sum(step) OVER w AS rel, count(*) FILTER (WHERE span > 0) OVER w AS sent
        FROM stepped
        WINDOW w AS (PARTITION BY flow ORDER BY ts_ns, sq)
    )
),
ranked AS (
    -- the flow's packets numbered once in the order above: rows tied in every key are alike, and
    -- every later window follows this one numbering, so which of them is last, and which one's
    -- duplicate ACK is the second, agree in every row (sorted apart, each window broke the tie its way)
    SELECT *, row_number() OVER (PARTITION BY flow, epoch ORDER BY ts_ns, rel, span, ak, fl, win) AS k
    FROM unwrapped
),
reached AS (
    -- `next`: the highest sequence end before this packet (`reach`: what the packet adds to it)
    SELECT *, max(rel + reach) OVER before AS nxt,
           lag(win) OVER f AS prev_win, lag(ak) OVER f AS prev_ak,
           lead(ts_ns) OVER f IS DISTINCT FROM ts_ns AS last_at_ts
    FROM ranked
    WINDOW f AS (PARTITION BY flow, epoch ORDER BY k),
           before AS (f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
ends AS (
    -- when `next` was reached: the last packet before this one that raised it (tshark's nextseqtime)
    SELECT *, max(ts_ns) FILTER (WHERE nxt IS NULL OR rel + reach > nxt) OVER earlier AS nxt_ns,
           sum((ak IS DISTINCT FROM prev_ak)::BIGINT) OVER (f ROWS UNBOUNDED PRECEDING) AS ack_run
    FROM reached
    WINDOW f AS (PARTITION BY flow, epoch ORDER BY k),
           earlier AS (f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
classified AS (
    SELECT *,
           len <= 1 AND fl & 7 = 0 AND rel = nxt - 1 AS keep_alive,
           span > 0 AND rel < nxt AND NOT (len <= 1 AND fl & 7 = 0 AND rel = nxt - 1)
               AND NOT (len > 1 AND rel = nxt - 1) AS behind,
           len = 0 AND fl & 7 = 0 AND win > 0 AND win = prev_win AND ak = prev_ak AND rel = nxt AS dup_ack,
           -- a sequence end sent more than once is no RTT sample (Karn)
           count(*) FILTER (WHERE span > 0) OVER (PARTITION BY flow, epoch, (sq::BIGINT + span) % 4294967296)
               AS sends_of_end
    FROM ends
),
acked AS (
    -- an ACK that answers a keep-alive (the reverse flow's last packet before it) is no dup ACK
    SELECT c.* REPLACE (c.dup_ack AND NOT coalesce(k.keep_alive, false) AS dup_ack)
    FROM classified AS c
    ASOF LEFT JOIN (SELECT flow, ts_ns, keep_alive FROM classified WHERE last_at_ts) AS k
        ON k.flow = c.back AND k.ts_ns < c.ts_ns
),
counted AS (
    SELECT *,
           count(*) FILTER (WHERE dup_ack) OVER (PARTITION BY flow, epoch, ack_run
                                                 ORDER BY k ROWS UNBOUNDED PRECEDING)
               AS dups
    FROM acked
),
syn AS (  -- SYNs without ACK, by connection (a key shared by both directions)
    SELECT least(flow, back) AS conn, ts_ns FROM seg WHERE fl & 18 = 2
),
first_ack AS (
    -- tshark's first RTT ends at the connection's first packet with ACK and without SYN, in either
    -- direction, later than the last SYN before it (one in the SYN's microsecond gives 0, which tshark
    -- takes for none and tries again)
    SELECT a.conn, min(a.ts_ns) AS ack_ns
    FROM (SELECT least(flow, back) AS conn, ts_ns FROM seg WHERE fl & 18 = 16) AS a
    JOIN (SELECT conn, min(ts_ns) AS first_ns FROM syn GROUP BY conn) AS f
        ON f.conn = a.conn AND a.ts_ns > f.first_ns
    ANTI JOIN syn AS s ON s.conn = a.conn AND s.ts_ns = a.ts_ns
    GROUP BY a.conn
),
threshold AS (  -- a connection's first RTT (tshark's): from the last SYN to that packet
    SELECT a.conn, a.ack_ns - max(s.ts_ns) AS rtt_ns
    FROM first_ack AS a
    JOIN syn AS s ON s.conn = a.conn AND s.ts_ns < a.ack_ns
    GROUP BY a.conn, a.ack_ns
),
judged AS (
    -- tshark's order of tests: data the reverse flow had acknowledged is a spurious retransmission;
    -- else a segment behind `next` at the number of ≥ 2 duplicate ACKs is a fast retransmission;
    -- else one sent soon after `next` was reached is out-of-order; else a retransmission
    SELECT c.*,
           c.len > 0 AND NOT c.keep_alive AND coalesce(r.ak, 0) <> 0
               AND (c.sq::BIGINT + c.len - r.ak::BIGINT + 6442450944) % 4294967296 - 2147483648 <= 0
               AS spurious_retransmission,
           c.behind AND coalesce(r.dups >= 2 AND r.ak = c.sq AND c.ts_ns - r.ts_ns < 20000000, false)
               AS fast_retransmission,
           c.behind AND c.ts_ns - c.nxt_ns < coalesce(t.rtt_ns, ooo_ns) AND c.rel + c.span <> c.nxt AS soon
    FROM counted AS c
    LEFT JOIN threshold AS t ON t.conn = least(c.flow, c.back)
    ASOF LEFT JOIN (SELECT flow, ts_ns, ak, dups FROM counted WHERE last_at_ts) AS r
        ON r.flow = c.back AND r.ts_ns < c.ts_ns
)
SELECT * EXCLUDE (k, prev_win, prev_ak, ack_run, soon, fast_retransmission),
       fast_retransmission AND NOT spurious_retransmission AS fast_retransmission,
       soon AND NOT spurious_retransmission AND NOT fast_retransmission AS ooo,
       spurious_retransmission OR fast_retransmission OR (behind AND NOT soon) AS retransmission
FROM judged;

CREATE OR REPLACE VIEW tcp_segments AS SELECT * FROM tcp_segments();
