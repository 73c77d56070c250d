-- TCP health per run and directed flow: retransmissions, out-of-order, dup ACKs, window events, RTT.
-- Kind: answer
-- Key: run, src_worker, dst_worker, src_port, dst_port
-- Headline: retransmissions, dup_acks, rtt_median_us
-- Needs: tcp
-- Partition: run
--
-- Semantics: one row per run and directed flow (src ip and port → dst ip and port) with ≥ 1 TCP packet
-- whose header the capture holds (tcp_window not NULL; a first IP fragment counts with payload 0, as
-- tshark without reassembly). A run with part files read before schema version 5 (`_files.read_version`:
-- no TCP sequence numbers, acknowledgments or windows were stored) is refused in one line naming
-- `tracecore ingest --force`, not answered with no flows. Sequence numbers are unwrapped across 2^32
-- by summing the signed 32-bit steps between a flow's packets, so flows of any length work; a SYN or
-- SYN+ACK whose sequence number is not that of the flow's SYN before it starts the flow afresh (a new
-- connection on the same ports, or the SYN+ACK after a RST, sequence number 0, refused an earlier SYN:
-- tshark's "port numbers reused"); a flow's packets are then taken in time order, packets of one
-- timestamp by unwrapped sequence number (then length, acknowledgment, flags, window: one order, so
-- the answer is the same on any number of threads). "The reverse flow's last packet" before a packet
-- is its last of an earlier timestamp.
-- What one direction can count: the paper's captures are sender-side (each worker captures what
-- it sends), so a flow's data and its ACKs are in different workers' files, and a run captured on
-- only some hosts has flows whose reverse is missing (reverse_seen false). From its own packets a
-- flow gets retransmissions, out_of_order, dup_acks and zero_window of the packets it sends (a
-- receiver's dup ACKs and zero windows are counted on its ACK flow, the reverse of the data flow);
-- spurious retransmissions, fast retransmissions, window_full and the RTT need the reverse flow
-- (without it a re-sent segment is a retransmission or out-of-order, RTT NULL, window_full 0). When
-- the two directions come from two hosts, RTT includes the offset between their clocks
-- (collective_clock_check, run.toml's clock offsets). TCP inside tunnels (VXLAN, Geneve, 6in4,
-- L2TP) is not seen: the TCP header columns are the outermost packet's.
--
-- Rules: tshark 4.0's `tcp.analysis.*` (epan/dissectors/packet-tcp.c, tcp_analyze_sequence_number),
-- a segment's tests in tshark's order, the first that holds deciding; tests/test_views_tcp_health.py
-- compares them flow by flow with tshark's.
--   segment          a packet with payload, SYN or FIN; it occupies its payload plus 1 for SYN and for
--                    FIN. `next`: the highest sequence end the flow sent before it
--   keep-alive       ≤ 1 byte at next − 1, no SYN/FIN/RST: none of the four below
--   behind           starts below `next`, unless > 1 byte at next − 1 (after a zero-window probe)
--   1. spurious      payload ending at or below the acknowledgment number of the reverse flow's last
--                    packet (data already acknowledged), behind or not (tshark: spurious_retransmission)
--   2. fast          behind, at the acknowledgment number of the reverse flow's last packet, which was
--                    its ≥ 2nd duplicate ACK of that number, sent < 20 ms before (tshark:
--                    fast_retransmission)
--   3. out-of-order  behind, sent less than the connection's first RTT (from its last SYN to its first
--                    later packet with ACK and without SYN, either direction; ooo_ns where it has none)
--                    after the packet that first reached `next`, and not ending exactly at `next`
--                    (tshark: out_of_order)
--   4. retransmission   any other segment that is behind (tshark: retransmission)
--   retransmissions  1 + 2 + 4 (tshark: retransmission, fast_retransmission and spurious_retransmission
--                    together)
--   dup_acks         no payload, no SYN/FIN/RST, a nonzero window equal to the flow's previous
--                    packet's, the same acknowledgment number, and sequence number = `next`, unless
--                    it answers a keep-alive (the reverse flow's last packet before it one; a zero-
--                    window probe is one) (tshark: tcp.analysis.duplicate_ack, keep_alive_ack)
--   zero_window      a window field of 0 on a packet without SYN/FIN/RST (tshark: zero_window)
--   window_full      a segment with payload, no SYN/FIN/RST, ending exactly at the reverse flow's
--                    last acknowledgment + its window scaled (tshark: window_full); window scaling
--                    applies when both SYNs carried the option, else the raw window
--   RTT              per ACK of the reverse flow that acknowledges exactly the end of a segment this
--                    flow sent once (Karn: a retransmitted sequence end is never sampled), the time
--                    from the segment to that ACK (tshark's tcp.analysis.ack_rtt on such ACKs)
--   Not followed: a 1-byte zero-window probe at `next` moves `next` here, not in tshark (Linux probes
--   with 0 bytes at next − 1, a keep-alive); an ACK of data the capture never saw does not reset the
--   reverse flow's duplicate ACK count as tshark's "ACKed unseen segment" does; tshark takes a `next`
--   of 0 (a segment ending at 2^32 exactly) for none, and the packet after it for new data.
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
--   ooo_ns   out-of-order threshold where no handshake was captured, ns (default 3 000 000 = 3 ms, tshark's); range [0, ∞)
-- Columns:
--   run
--   src_worker, dst_worker        worker labels of the flow's ends; NULL where an end is no worker
--   src_ip, src_port, dst_ip, dst_port   the directed flow
--   packets                       TCP packets of the flow (count)
--   data_packets                  packets with payload (count)
--   payload_bytes                 sum of l4_payload_len, bytes (retransmitted payload included)
--   retransmissions               segments (count), rules above: 1, 2 and 4
--   spurious_retransmissions      segments (count) of rule 1, among retransmissions
--   retransmitted_bytes           payload of those segments, bytes
--   out_of_order                  segments (count), rule 3
--   dup_acks                      packets (count)
--   zero_window                   packets (count)
--   window_full                   segments (count)
--   window_scale                  the flow's SYN window scale shift; NULL where its SYN was not seen
--                                 or had no option
--   reverse_seen                  true when the dataset holds packets of the reverse flow
--   rtt_samples                   RTT samples (count)
--   rtt_min_us, rtt_median_us, rtt_max_us   RTT, microseconds; NULL without samples
CREATE OR REPLACE MACRO tcp_health(runs := NULL, from_ns := NULL, to_ns := NULL, ooo_ns := 3000000) AS TABLE
WITH marked AS MATERIALIZED (  -- every TCP packet, classified by the rules above
    SELECT * FROM tcp_segments(runs := runs, from_ns := from_ns, to_ns := to_ns, ooo_ns := ooo_ns)
),
syn_scale AS (
    -- each flow's SYN window scale
    SELECT flow, max(shift) AS shift FROM marked GROUP BY flow
),
reverse_state AS (
    -- each ACK as the receiver state of the flow it acknowledges: its acknowledgment and window,
    -- scaled when both directions' SYNs carried the option (a SYN's own window never is)
    SELECT r.back AS flow, r.ts_ns, r.ak, r.last_at_ts,
           r.win::BIGINT << CASE WHEN r.fl & 2 = 0 AND a.shift IS NOT NULL AND b.shift IS NOT NULL
                                 THEN b.shift ELSE 0 END AS wnd
    FROM marked AS r
    LEFT JOIN syn_scale AS b ON b.flow = r.flow
    LEFT JOIN syn_scale AS a ON a.flow = r.back
    WHERE r.fl & 16 = 16
),
full_window AS (
    SELECT m.flow, count(*) AS window_full
    FROM marked AS m
    ASOF JOIN (SELECT * FROM reverse_state WHERE last_at_ts) AS r ON r.flow = m.flow AND r.ts_ns < m.ts_ns
    WHERE m.len > 0 AND m.fl & 7 = 0 AND (m.sq::BIGINT + m.len) % 4294967296 = (r.ak::BIGINT + r.wnd) % 4294967296
    GROUP BY m.flow
),
rtt AS (
    SELECT m.flow, count(*) AS rtt_samples, min(a.ts_ns - m.ts_ns) / 1000 AS rtt_min_us,
           median(a.ts_ns - m.ts_ns) / 1000 AS rtt_median_us, max(a.ts_ns - m.ts_ns) / 1000 AS rtt_max_us
    FROM marked AS m
    JOIN (
        -- the first ACK with each acknowledgment number
        SELECT flow, ak, min(ts_ns) AS ts_ns FROM reverse_state GROUP BY flow, ak
    ) AS a ON a.flow = m.flow AND a.ak = (m.sq::BIGINT + m.span) % 4294967296 AND a.ts_ns > m.ts_ns
    WHERE m.span > 0 AND m.sends_of_end = 1
    GROUP BY m.flow
),
names AS (
    -- the flows' names, read apart: the window steps above carry numbers only
    SELECT DISTINCT hash(run, src_ip, src_port, dst_ip, dst_port) AS flow, run, src_ip, src_port, dst_ip, dst_port
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE ip_proto = 6 AND tcp_window IS NOT NULL AND tcp_flags IS NOT NULL
),
stale AS (
    -- the selected runs' part files read before the TCP fields existed (NULL in every row)
    SELECT min(run) AS run, count(*) AS parts, min(read_version) AS version
    FROM _files
    WHERE read_version < 5 AND (runs IS NULL OR list_contains(runs, run))
),
flows AS (
    SELECT flow, any_value(back) AS back, count(*) AS packets, count(*) FILTER (len > 0) AS data_packets,
           sum(len) AS payload_bytes,
           count(*) FILTER (retransmission) AS retransmissions,
           count(*) FILTER (spurious_retransmission) AS spurious_retransmissions,
           coalesce(sum(len) FILTER (retransmission), 0) AS retransmitted_bytes,
           count(*) FILTER (ooo) AS out_of_order,
           count(*) FILTER (dup_ack) AS dup_acks,
           count(*) FILTER (win = 0 AND fl & 7 = 0) AS zero_window
    FROM marked
    GROUP BY flow
)
SELECT n.run, wp.src_worker, wp.dst_worker, n.src_ip, n.src_port, n.dst_ip, n.dst_port,
       f.packets, f.data_packets, f.payload_bytes, f.retransmissions, f.spurious_retransmissions,
       f.retransmitted_bytes, f.out_of_order,
       f.dup_acks, f.zero_window, coalesce(w.window_full, 0) AS window_full, s.shift AS window_scale,
       rev.flow IS NOT NULL AS reverse_seen, coalesce(r.rtt_samples, 0) AS rtt_samples, r.rtt_min_us,
       r.rtt_median_us, r.rtt_max_us
FROM flows AS f
JOIN names AS n ON n.flow = f.flow
LEFT JOIN worker_pairs AS wp
    ON wp.pair = xor(xor(hash(n.src_ip), hash(n.dst_ip) >> 1), hash(n.run) >> 2)
LEFT JOIN syn_scale AS s ON s.flow = f.flow
LEFT JOIN syn_scale AS rev ON rev.flow = f.back
LEFT JOIN full_window AS w ON w.flow = f.flow
LEFT JOIN rtt AS r ON r.flow = f.flow
UNION ALL BY NAME
-- no rows: the refusal of runs read before the TCP fields, a filter on `stale`'s one row (one on the
-- flows would never run where the missing fields leave none)
SELECT run
FROM stale
WHERE CASE WHEN parts > 0
           THEN error(format('tracecore: run {} was ingested before tracecore read TCP sequence numbers ({} part '
                             || 'files of schema version {}): tcp_health would find no flows there; re-read its '
                             || 'captures with `tracecore ingest --force`, or ask for other runs (runs := [...])',
                             run, parts, version))
           ELSE false END
ORDER BY run, src_ip, src_port, dst_ip, dst_port;

CREATE OR REPLACE VIEW tcp_health AS SELECT * FROM tcp_health();
