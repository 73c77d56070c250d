-- Each recorded collective on each directed worker link: its bytes on the wire, prediction and speed.
--
-- The bytes are found by the order of each connection's byte stream, and set beside what the
-- collective's algorithm predicts and what the GPU side measured.
-- Kind: answer
-- Key: run, step, seq, op, src_worker, dst_worker
-- Headline: bytes, ratio, gbps, busy_ns
-- Needs: collectives
-- Partition: run
--
-- Why not time windows alone: a rank's proxy thread keeps sending after its own kernel ends, and two
-- buckets sent back to back share the same sockets, so bytes counted inside a collective's window
-- belong partly to its neighbour (up to 5.7 % over-counted on the mlp25m corpus run, 11–13 % missed
-- with one rank's kernel window on cnn3m). What holds instead: a TCP connection carries its
-- communicator's collectives one after another, in issue order. So, per data connection of a link
-- and per source, the collectives on that link in the order their sender started them each own one
-- contiguous range of the connection's byte stream. A segment's place in the stream is its TCP
-- sequence number unwrapped and taken from the connection's first (the payload sent before it where
-- the part files have no sequence numbers: read before schema version 5), so a re-sent segment falls
-- where its first copy did: its bytes count once, and apart as resent_bytes.
--   p_i   predicted bytes of collective i on the connection: collective_links' prediction for the
--         link times the connection's share of the link's bytes over the run (NCCL spreads a message
--         over its channels nearly, not exactly, evenly), + 64 B for NCCL's framing (4 B before each
--         message it sends); 0 on a connection the collective did not use: where all its ranks ended
--         before the connection's next packet, and where it ran on fewer channels (the source's
--         n_channels: NCCL sends a small message on one) than the link has data connections — the
--         connections whose next packet came first are the ones it used
--   a_i   where the stream stood (the highest byte sent so far) at its first packet at or after the
--         instance's earliest start − err_ns (no bytes of a collective leave before some rank starts
--         it); a0_i the same at or after the start itself
--   b_i   = max(a_i, b_{i−1} + p_{i−1}): where its range starts by prediction (after the previous
--         one's, even when they are back to back on the socket), computed as P_i + running max of
--         (a_j − P_j), with P the prefix sum of p — window functions, no recursion
--   s_i   where it starts: the message boundary (NCCL's socket transport sends each message's size as
--         a 4-byte frame of its own before it) nearest b_i when at most p_i/100 away and past the
--         previous collective's anchor (back-to-back buckets part at one); else a_i when it is short
--         of b_i by at most 4 KiB + p_i/1000 (an anchor that close is the collective's true start),
--         unless the previous collective with room found the same first packet, then a0_i when that
--         is a later one; else b_i
--   e_i   = s_{i+1} when the next starts at most p_i/100 + 4 KiB past b_i + p_i (it ran on to there),
--         else min(b_i + p_i, s_{i+1})
--   a packet belongs to collective i when the middle of its bytes falls in [s_i, e_i), so a range
--         a few bytes too long or short neither takes its neighbour's first packet nor loses its last,
--         and, when every rank recorded the instance, it left by the instance's end + err_ns (a rank's
--         kernel cannot finish before the bytes sent to it arrived).
-- Bytes between ranges (bootstrap, collectives the source did not record) belong to none, and a
-- framing of a few bytes per NCCL message travels inside the ranges. Of two tiny collectives that
-- found the same first packet, one may take the other's few bytes. Data connections: the TCP
-- connections of the worker pair that carry at least min_conn_share of its busiest one's payload
-- (NCCL: one per channel per socket; PyTorch's store and NCCL's bootstrap carry little).
-- Several communicators on one link are taken in one sequence by their senders' start times.
-- Busy time: the gaps between consecutive frames of the collective on the link, each counted only
-- when at most idle_ns long. Payload is TCP payload (l4_payload_len); the capture may be sender-side
-- only (a link's frames are in its sender's capture). On the GPU corpus every row of a collective of
-- at least 1 MB is the count of its bytes by sequence number (tests/test_views_collectives.py).
--
-- Parameters:
--   runs             list of run names; NULL = every run
--   err_ns           allowed clock error before a collective's start, ns; NULL = the largest stated
--                    error of the source's files (collective_clocks.error_ns), else 1 ms; range [0, ∞)
--   idle_ns          a longer gap between frames is idle time, ns (default 1 000 000 = 1 ms); range (0, ∞)
--   min_conn_share   data connections carry at least this share of the pair's busiest one (default 0.1); range [0, 1]
-- Columns:
--   run, source, comm, seq, op, step, algorithm, n_ranks   the collective instance (as collective_links)
--   message_bytes           S: NCCL's count × element size, bytes
--   src_worker, dst_worker, src_rank, dst_rank             the directed link and its ranks
--   src_file                the sending rank's source file
--   start_ns, end_ns        the instance on its ranks: earliest start, latest end, on the sending host's
--                           clock (its capture's), UTC ns
--   sender_start_ns         the sending rank's own start, UTC ns
--   window_frames           frames on the link's data connections inside [start_ns, end_ns] (the naive count)
--   window_bytes            their TCP payload, bytes
--   frames                  frames attributed to the collective by byte order (re-sent ones too)
--   bytes                   their TCP payload, each byte once, bytes
--   resent_frames           frames of it that carried bytes sent before (retransmissions)
--   resent_bytes            those bytes, bytes
--   predicted_bytes         what its algorithm puts on the link, bytes
--   ratio                   bytes / predicted_bytes
--   connections             data connections of the link
--   first_byte_ns, last_byte_ns   first and last attributed frame, UTC ns
--   bulk_start_ns           its first attributed frame of at least 1 KiB of payload, UTC ns (small frames
--                           before it may be other messages, below a source's recording floor)
--   busy_ns                 wire busy time of the attributed frames, ns
--   gbps                    bytes·8 / busy_ns, Gbit/s (achieved on the wire)
--   gpu_algbw_gbs, gpu_busbw_gbs  algorithm and bus bandwidth on the GPU side, GB/s: the source's own
--                           figures (Inspector), else the message over the sender's start–end with
--                           nccl-tests' factors (all_reduce 2(N−1)/N, all_gather and reduce_scatter
--                           (N−1)/N of N·S, others 1), N the communicator's size as collective_calls
--                           finds it (n_ranks: the source's, else NCCL's log); NULL when N is unknown
CREATE OR REPLACE MACRO collective_wire(runs := NULL, err_ns := NULL, idle_ns := 1000000, min_conn_share := 0.1) AS TABLE
WITH
links AS (
    SELECT l.* EXCLUDE (instance_start_ns, instance_end_ns), s.ip AS src_ip, d.ip AS dst_ip,
           -- the instance on the sender's host clock, which its capture was taken with
           l.instance_start_ns + coalesce(l.clock_offset_ns, 0) AS instance_start_ns,
           l.instance_end_ns + coalesce(l.clock_offset_ns, 0) AS instance_end_ns,
           coalesce(err_ns, (SELECT max(k.error_ns) FROM collective_clocks AS k
                             WHERE k.run = l.run AND k.source = l.source), 1000000) AS err
    FROM collective_links AS l
    JOIN workers AS s ON s.run = l.run AND s.worker = l.src_worker
    JOIN workers AS d ON d.run = l.run AND d.worker = l.dst_worker
    WHERE (runs IS NULL OR list_contains(runs, l.run)) AND l.start_ns IS NOT NULL
),
pairs AS (SELECT DISTINCT run, src_ip, dst_ip FROM links),
conn_bytes AS (
    SELECT p.run, p.src_ip, p.dst_ip, p.src_port, p.dst_port, sum(p.l4_payload_len) AS payload,
           count(*) FILTER (WHERE p.tcp_seq IS NULL) AS unnumbered
    FROM packets AS p
    JOIN pairs AS k ON k.run = p.run AND k.src_ip = p.src_ip AND k.dst_ip = p.dst_ip
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.ip_proto = 6 AND p.l4_payload_len > 0
    GROUP BY ALL
),
data_conns AS (  -- one integer key per directed connection (the views group on it, not on 5 columns)
    SELECT *, hash(run, src_ip, dst_ip, src_port, dst_port) AS conn,
           count(*) OVER (PARTITION BY run, src_ip, dst_ip) AS n_conns
    FROM (SELECT *, max(payload) OVER (PARTITION BY run, src_ip, dst_ip) AS top FROM conn_bytes)
    WHERE payload >= min_conn_share * top
),
segments AS (  -- the data connections' segments, each sequence number's signed 32-bit step from the last
    SELECT c.run, c.conn, c.unnumbered, p.ts_ns, p.frame_len, p.l4_payload_len AS len, p.tcp_seq AS sq,
           (p.tcp_seq::BIGINT - coalesce(lag(p.tcp_seq) OVER w, p.tcp_seq)::BIGINT + 6442450944) % 4294967296
               - 2147483648 AS step,
           (sum(p.l4_payload_len) OVER (w ROWS UNBOUNDED PRECEDING) - p.l4_payload_len)::BIGINT AS paid
    FROM packets AS p
    JOIN data_conns AS c
        ON c.run = p.run AND c.src_ip = p.src_ip AND c.dst_ip = p.dst_ip AND c.src_port = p.src_port
        AND c.dst_port = p.dst_port
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.ip_proto = 6 AND p.l4_payload_len > 0
    WINDOW w AS (PARTITION BY c.conn ORDER BY p.ts_ns, p.tcp_seq, p.l4_payload_len, p.frame_len)
),
placed AS (  -- each segment's offset in its connection's byte stream: its sequence number unwrapped (the
             -- steps' running sum: any order of one instant's segments gives the same), so a re-sent
             -- segment keeps its bytes' place; the payload sent before it where the capture has no
             -- sequence numbers (part files read before schema version 5)
    SELECT run, conn, ts_ns, frame_len, len, (pos - min(pos) OVER (PARTITION BY conn))::BIGINT AS off
    FROM (
        SELECT *, CASE WHEN unnumbered = 0
                       THEN sum(step) OVER (PARTITION BY conn ORDER BY ts_ns, sq, len, frame_len ROWS UNBOUNDED PRECEDING)
                       ELSE paid END::BIGINT AS pos
        FROM segments
    )
),
stream AS MATERIALIZED (  -- cum: where the stream stood before the segment (the highest byte sent so far);
                          -- fresh: its bytes not sent before (a retransmission's: 0)
    SELECT run, conn, ts_ns, frame_len, len, off::BIGINT AS off, len // 2 AS half,
           greatest(off, coalesce(reached, off))::BIGINT AS cum,
           greatest(0, off + len - greatest(off, coalesce(reached, off)))::BIGINT AS fresh
    FROM (
        SELECT *, max(off + len) OVER (PARTITION BY conn ORDER BY ts_ns, off, len, frame_len
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reached
        FROM placed
    )
),
extents AS (  -- each connection's stream length and its share of its link's bytes
    SELECT c.conn, max(s.off + s.len) AS extent,
           sum(s.fresh) / sum(sum(s.fresh)) OVER (PARTITION BY c.run, c.src_ip, c.dst_ip) AS share
    FROM stream AS s JOIN data_conns AS c USING (conn)
    GROUP BY c.conn, c.run, c.src_ip, c.dst_ip
),
first_at AS (  -- where each connection's stream stood at each instant: one row per timestamp
    SELECT conn, ts_ns, min(cum) AS cum FROM stream GROUP BY conn, ts_ns
),
on_conn AS (  -- each collective on each data connection of its link, in issue order per source
    SELECT l.*, c.conn, c.n_conns, x.extent, x.share, k.n_channels,
           l.predicted_bytes * x.share + 64 AS p, l.instance_start_ns - l.err AS anchor_ns,
           row_number() OVER (PARTITION BY l.source, c.conn ORDER BY l.start_ns, l.comm, l.seq) AS i
    FROM links AS l
    JOIN data_conns AS c ON c.run = l.run AND c.src_ip = l.src_ip AND c.dst_ip = l.dst_ip
    JOIN extents AS x ON x.conn = c.conn
    LEFT JOIN (SELECT DISTINCT run, source, comm, seq, rank, n_channels FROM collective_calls) AS k
        ON k.run = l.run AND k.source = l.source AND k.comm IS NOT DISTINCT FROM l.comm AND k.seq = l.seq
        AND k.rank = l.src_rank
),
found AS (  -- each collective's first packet on each connection at or after its start − err (and without err)
    SELECT o.*, f.ts_ns AS anchor_at, coalesce(f.cum, o.extent)::BIGINT AS a, coalesce(g.cum, o.extent)::BIGINT AS a0,
           row_number() OVER (PARTITION BY o.run, o.source, o.comm, o.seq, o.src_ip, o.dst_ip
                              ORDER BY f.ts_ns NULLS LAST, o.conn) AS by_time
    FROM on_conn AS o
    ASOF LEFT JOIN first_at AS f ON f.conn = o.conn AND o.anchor_ns <= f.ts_ns
    ASOF LEFT JOIN first_at AS g ON g.conn = o.conn AND o.instance_start_ns <= g.ts_ns
),
anchored AS (  -- room in each connection's stream: none where its ranks all ended before the connection's
               -- next packet (its bytes took other connections), nor on the connections a collective of
               -- fewer channels than the link has connections did not use (NCCL runs a small message on
               -- one channel: the connections whose next packet comes first are taken)
    SELECT * REPLACE (
               CASE WHEN instance_ranks >= n_ranks AND coalesce(anchor_at > instance_end_ns + err, true) THEN 0
                    WHEN by_time > least(coalesce(n_channels, n_conns), n_conns) THEN 0
                    WHEN n_channels < n_conns
                    THEN predicted_bytes * share / sum(share) FILTER (WHERE by_time <= n_channels) OVER link + 64
                    ELSE p END AS p
           )
    FROM found
    WINDOW link AS (PARTITION BY run, source, comm, seq, src_ip, dst_ip)
),
prefixed AS (
    SELECT *,
           coalesce(sum(p) OVER (PARTITION BY source, conn ORDER BY i
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM anchored
),
ranged AS (
    SELECT *, before + max(a - before) OVER (PARTITION BY source, conn ORDER BY i
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS b
    FROM prefixed
),
markers AS (  -- NCCL's socket transport sends each message's size as a frame of its own (4 bytes) before it,
              -- so collectives sent back to back part at one of these
    SELECT conn, off AS m FROM stream WHERE len = 4 AND fresh = 4
),
marked AS (  -- the nearest message boundary on either side of the chained start
    SELECT r.*, lo.m AS m_lo, hi.m AS m_hi
    FROM ranged AS r
    ASOF LEFT JOIN markers AS lo ON lo.conn = r.conn AND r.b >= lo.m
    ASOF LEFT JOIN markers AS hi ON hi.conn = r.conn AND r.b <= hi.m
),
started AS (  -- the message boundary nearest the chained start, within p/100 (the prediction's error: NCCL
              -- splits a message over its channels unevenly, by tens of kB); else an anchor just short of
              -- the chained start (predictions err a little); where the previous collective with room found
              -- the same anchor, the first packet at or after the instance's start itself (no clock error
              -- allowed) tells them apart when it is a later one
    SELECT *,
           CASE
               WHEN abs(near - b) <= p / 100 AND near > coalesce(lag(a) OVER w, -1) AND near >= a - p / 100
               THEN near
               WHEN a >= b - (4096 + p / 1000) AND a > coalesce(lag(CASE WHEN p > 0 THEN a END IGNORE NULLS) OVER w, -1)
               THEN a
               WHEN a0 >= b - (4096 + p / 1000) AND a0 <= b
                    AND a0 > coalesce(lag(CASE WHEN p > 0 THEN a0 END IGNORE NULLS) OVER w, -1)
               THEN a0
               ELSE b
           END AS s
    FROM (SELECT *, CASE WHEN m_hi IS NULL OR b - m_lo <= m_hi - b THEN coalesce(m_lo, m_hi) ELSE m_hi END AS near
          FROM marked)
    WINDOW w AS (PARTITION BY source, conn ORDER BY i)
),
bounded AS MATERIALIZED (  -- a range ends where the next starts when that is at most p/100 past its predicted
                          -- end (it ran on to there), else at its predicted end
    SELECT * EXCLUDE (nxt),
           CASE WHEN nxt >= s AND nxt <= b + p + 4096 + p / 100 THEN nxt ELSE least(b + p, coalesce(nxt, b + p)) END AS e
    FROM (SELECT *, lead(s) OVER (PARTITION BY source, conn ORDER BY i) AS nxt FROM started)
),
sources AS (SELECT DISTINCT run, source FROM bounded),
assigned AS (
    SELECT r.run, r.source, r.comm, r.seq, r.src_ip, r.dst_ip, s.ts_ns, s.frame_len, s.len, s.fresh
    FROM (SELECT s.*, x.source FROM stream AS s JOIN sources AS x ON x.run = s.run) AS s
    ASOF JOIN (SELECT * FROM bounded WHERE e > s) AS r  -- empty ranges would tie with the next
        ON r.conn = s.conn AND r.source = s.source AND r.s <= s.off + s.half
    WHERE s.off + s.half < r.e AND (r.instance_ranks < r.n_ranks OR s.ts_ns <= r.instance_end_ns + r.err)
),
gaps AS (
    SELECT *, ts_ns - lag(ts_ns) OVER (PARTITION BY run, source, comm, seq, src_ip, dst_ip ORDER BY ts_ns) AS gap
    FROM assigned
),
wire AS (
    SELECT run, source, comm, seq, src_ip, dst_ip, count(*) AS frames, sum(fresh)::BIGINT AS bytes,
           count(*) FILTER (WHERE fresh < len) AS resent_frames, sum(len - fresh)::BIGINT AS resent_bytes,
           min(ts_ns) AS first_byte_ns, max(ts_ns) AS last_byte_ns, min(ts_ns) FILTER (WHERE len >= 1024) AS bulk_start_ns,
           coalesce(sum(gap) FILTER (WHERE gap <= idle_ns), 0)::BIGINT AS busy_ns
    FROM gaps
    GROUP BY ALL
),
windowed AS (
    SELECT l.run, l.source, l.comm, l.seq, l.src_ip, l.dst_ip, count(s.ts_ns) AS window_frames,
           coalesce(sum(s.len), 0)::BIGINT AS window_bytes
    FROM (SELECT DISTINCT run, source, comm, seq, src_ip, dst_ip, instance_start_ns, instance_end_ns FROM links) AS l
    LEFT JOIN (SELECT s.*, c.src_ip, c.dst_ip FROM stream AS s JOIN data_conns AS c USING (conn)) AS s
        ON s.run = l.run AND s.src_ip = l.src_ip AND s.dst_ip = l.dst_ip
        AND s.ts_ns BETWEEN l.instance_start_ns AND l.instance_end_ns
    GROUP BY ALL
),
conns AS (SELECT run, src_ip, dst_ip, any_value(n_conns) AS connections FROM data_conns GROUP BY ALL),
gpu AS (
    SELECT c.run, c.source, c.comm, c.seq, c.rank,
           coalesce(c.algbw_gbs, c.bytes * CASE WHEN c.op IN ('all_gather', 'reduce_scatter') THEN n ELSE 1 END
                                 / nullif(c.end_ns - c.start_ns, 0)) AS algbw,
           c.busbw_gbs, n
    FROM (SELECT *, n_ranks AS n FROM collective_calls) AS c
)
SELECT l.run, l.source, l.comm, l.seq, l.op, l.step, l.algorithm, l.n_ranks, l.bytes AS message_bytes,
       l.src_worker, l.dst_worker, l.src_rank, l.dst_rank, l.file AS src_file,
       l.instance_start_ns AS start_ns, l.instance_end_ns AS end_ns, l.start_ns AS sender_start_ns,
       wn.window_frames, wn.window_bytes,
       coalesce(w.frames, 0) AS frames, coalesce(w.bytes, 0) AS bytes, coalesce(w.resent_frames, 0) AS resent_frames,
       coalesce(w.resent_bytes, 0) AS resent_bytes, l.predicted_bytes,
       coalesce(w.bytes, 0) / l.predicted_bytes AS ratio, cn.connections,
       w.first_byte_ns, w.last_byte_ns, w.bulk_start_ns, w.busy_ns,
       w.bytes * 8.0 / nullif(w.busy_ns, 0) AS gbps,
       g.algbw AS gpu_algbw_gbs,
       coalesce(g.busbw_gbs, g.algbw * CASE
           WHEN l.op = 'all_reduce' THEN 2.0 * (g.n - 1) / g.n
           WHEN l.op IN ('all_gather', 'reduce_scatter') THEN (g.n - 1.0) / g.n
           ELSE 1.0 END) AS gpu_busbw_gbs
FROM links AS l
LEFT JOIN wire AS w
    ON w.run = l.run AND w.source = l.source AND w.comm IS NOT DISTINCT FROM l.comm AND w.seq = l.seq
    AND w.src_ip = l.src_ip AND w.dst_ip = l.dst_ip
LEFT JOIN windowed AS wn
    ON wn.run = l.run AND wn.source = l.source AND wn.comm IS NOT DISTINCT FROM l.comm AND wn.seq = l.seq
    AND wn.src_ip = l.src_ip AND wn.dst_ip = l.dst_ip
LEFT JOIN conns AS cn ON cn.run = l.run AND cn.src_ip = l.src_ip AND cn.dst_ip = l.dst_ip
LEFT JOIN gpu AS g
    ON g.run = l.run AND g.source = l.source AND g.comm IS NOT DISTINCT FROM l.comm AND g.seq = l.seq
    AND g.rank = l.src_rank
ORDER BY l.run, l.source, l.comm, l.seq, l.src_worker, l.dst_worker;

CREATE OR REPLACE VIEW collective_wire AS SELECT * FROM collective_wire();
