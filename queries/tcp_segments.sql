-- Each TCP packet of a run with tcp_health's classification: retransmission, out-of-order, dup ACK.
-- Kind: building block
-- Partition: run
--
-- tcp_health's rules (see its header) applied packet by packet, so views that need to know *when* a
-- flow retransmitted (collective_verdicts: during which collective) count what tcp_health counts.
-- One row per TCP packet whose header the capture holds; a flow is `flow` = hash(run, src_ip,
-- src_port, dst_ip, dst_port), its reverse `back` (a view joins its own flows' names by that hash).
--
-- Parameters:
--   runs, from_ns, to_ns, ooo_ns   as tcp_health's
-- Columns:
--   flow, back          the directed flow and its reverse (hash keys)
--   ts_ns               the packet, UTC ns
--   fl, sq, ak, win, shift   TCP flags, sequence and acknowledgment numbers, window, SYN window scale
--   len                 TCP payload, bytes
--   span                len + 1 for SYN and for FIN (the sequence space the packet occupies)
--   rel                 sequence number unwrapped across 2^32, relative to the flow's first packet
--   nxt, nxt_ns         the highest sequence end the flow sent before it, and when that was sent
--   behind              it starts below nxt (keep-alives excepted)
--   ooo                 out-of-order (tcp_health's rule)
--   retransmission      behind and not out-of-order
--   dup_ack, keep_alive     tcp_health's rules
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
stepped AS (
    -- the signed 32-bit step of the sequence number from the flow's previous packet
    SELECT *,
           (sq::BIGINT - coalesce(lag(sq) OVER f, sq)::BIGINT + 6442450944) % 4294967296 - 2147483648 AS step
    FROM seg
    WINDOW f AS (PARTITION BY flow ORDER BY ts_ns, sq, ak)
),
unwrapped AS (
    SELECT *, sum(step) OVER (PARTITION BY flow ORDER BY ts_ns, sq, ak ROWS UNBOUNDED PRECEDING) AS rel
    FROM stepped
),
ends AS (
    -- `next`: the highest sequence end before this packet, and when the packet that set it was sent
    SELECT *, max(rel + span) OVER before AS nxt,
           arg_max(ts_ns, rel + span) OVER before AS nxt_ns,
           lag(win) OVER f AS prev_win, lag(ak) OVER f AS prev_ak
    FROM unwrapped
    WINDOW f AS (PARTITION BY flow ORDER BY ts_ns, sq, ak),
           before AS (f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
classified AS (
    SELECT *,
           span > 0 AND rel < nxt
               AND NOT (len <= 1 AND fl & 7 = 0 AND rel = nxt - 1) AS behind,  -- keep-alives excepted
           len = 0 AND fl & 7 = 0 AND win > 0 AND win = prev_win AND ak = prev_ak AND rel = nxt AS dup_ack,
           len <= 1 AND fl & 7 = 0 AND rel = nxt - 1 AS keep_alive,
           -- a sequence end sent more than once is no RTT sample (Karn)
           count(*) FILTER (WHERE span > 0) OVER (PARTITION BY flow, (sq::BIGINT + span) % 4294967296)
               AS sends_of_end
    FROM ends
),
acked AS (
    -- an ACK that answers a keep-alive (the reverse flow's last packet before it) is no dup ACK
    SELECT c.* REPLACE (c.dup_ack AND NOT coalesce(k.keep_alive, false) AS dup_ack)
    FROM classified AS c
    ASOF LEFT JOIN (SELECT flow, ts_ns, keep_alive FROM classified) AS k ON k.flow = c.back AND k.ts_ns < c.ts_ns
),
handshake AS (
    -- a connection's first RTT (tshark's): from the client's last SYN to its first ACK without SYN
    SELECT a.flow, a.back, a.ack_ns - max(s.ts_ns) AS rtt_ns
    FROM (
        SELECT flow, any_value(back) AS back, min(ts_ns) AS ack_ns
        FROM seg
        WHERE fl & 18 = 16 AND flow IN (SELECT flow FROM seg WHERE fl & 18 = 2)
        GROUP BY flow
    ) AS a
    JOIN seg AS s ON s.flow = a.flow AND s.fl & 18 = 2 AND s.ts_ns < a.ack_ns
    GROUP BY a.flow, a.back, a.ack_ns
),
threshold AS (
    SELECT flow, rtt_ns FROM handshake
    UNION ALL
    SELECT back, rtt_ns FROM handshake
),
dup_runs AS (
    -- each ACK as the receiver state of the flow it acknowledges (`back`): the acknowledgment number
    -- and how many duplicate ACKs of it came so far
    SELECT back AS flow, ts_ns, ak,
           count(*) FILTER (WHERE dup_ack) OVER (PARTITION BY flow, ak ORDER BY ts_ns, sq ROWS UNBOUNDED PRECEDING)
               AS dups
    FROM acked
    WHERE fl & 16 = 16
),
marked AS (
    -- a fast retransmission (tshark: ≥ 2 duplicate ACKs of its sequence number, the last < 20 ms
    -- before it) is a retransmission even when it would pass for out-of-order
    SELECT c.*, c.behind AND c.ts_ns - c.nxt_ns < coalesce(t.rtt_ns, ooo_ns) AND c.rel + c.span <> c.nxt
               AND NOT coalesce(d.dups >= 2 AND d.ak = c.sq AND c.ts_ns - d.ts_ns < 20000000, false) AS ooo
    FROM acked AS c
    LEFT JOIN threshold AS t ON t.flow = c.flow
    ASOF LEFT JOIN dup_runs AS d ON d.flow = c.flow AND d.ts_ns < c.ts_ns
)
SELECT * EXCLUDE (step, prev_win, prev_ak), behind AND NOT ooo AS retransmission
FROM marked;
