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
-- contiguous range of the connection's payload:
--   p_i   predicted bytes of collective i on the connection: collective_links' prediction for the
--         link divided evenly among the link's data connections (NCCL spreads its channels, and each
--         channel's sockets, evenly), + 64 B for NCCL's framing (4 B before each message it sends)
--   a_i   the connection's payload offset at its first packet at or after the instance's earliest
--         start − err_ns (no bytes of a collective leave before some rank starts it)
--   b_i   = max(a_i, b_{i−1} + p_{i−1}): where its range starts (after the previous one's, even when
--         they are back to back on the socket), computed as P_i + running max of (a_j − P_j), with P
--         the prefix sum of p — window functions, no recursion
--   s_i   = a_i instead when a_i is short of b_i by at most 4 KiB + p_i/1000 (the prediction errs by
--         NCCL's channel split and framing; an anchor that close is the collective's true start),
--         unless the previous collective found the same first packet (then time tells them not apart)
--   e_i   = min(b_i + p_i, s_{i+1}): a range ends where the next one starts at the latest
--   a packet belongs to collective i when the middle of its payload falls in [s_i, e_i), so a range
--         a few bytes too long or short neither takes its neighbour's first packet nor loses its last,
--         and, when every rank recorded the instance, it left by the instance's end + err_ns (a rank's
--         kernel cannot finish before the bytes sent to it arrived).
-- Bytes between ranges (bootstrap, collectives the source did not record) belong to none, and a
-- framing of a few bytes per NCCL message travels inside the ranges. Data connections: the TCP
-- connections of the worker pair that carry at least min_conn_share of its busiest one's payload
-- (NCCL: one per channel per socket; PyTorch's store and NCCL's bootstrap carry little).
-- Several communicators on one link are taken in one sequence by their senders' start times.
-- Busy time: the gaps between consecutive frames of the collective on the link, each counted only
-- when at most idle_ns long. Payload is TCP payload (l4_payload_len); the capture may be sender-side
-- only (a link's frames are in its sender's capture). Retransmitted bytes would count twice (the
-- schema has no TCP sequence numbers); sender-side captures of the corpus lose none.
--
-- Parameters:
--   runs             list of run names; NULL = every run
--   err_ns           allowed clock error before a collective's start, ns; NULL = the largest stated
--                    error of the source's files (collective_clocks.error_ns), else 1 ms
--   idle_ns          a longer gap between frames is idle time, ns (default 1 000 000 = 1 ms)
--   min_conn_share   data connections carry at least this share of the pair's busiest one (default 0.1)
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
--   frames                  frames attributed to the collective by byte order
--   bytes                   their TCP payload, bytes
--   predicted_bytes         what its algorithm puts on the link, bytes
--   ratio                   bytes / predicted_bytes
--   connections             data connections of the link
--   first_byte_ns, last_byte_ns   first and last attributed frame, UTC ns
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
    SELECT p.run, p.src_ip, p.dst_ip, p.src_port, p.dst_port, sum(p.l4_payload_len) AS payload
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
stream AS MATERIALIZED (
    SELECT c.run, c.conn, p.ts_ns, p.frame_len, p.l4_payload_len AS len,
           (sum(p.l4_payload_len) OVER (
               PARTITION BY c.conn ORDER BY p.ts_ns, p.l4_payload_len, p.frame_len
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
           ) - p.l4_payload_len)::BIGINT AS cum, p.l4_payload_len // 2 AS half
    FROM packets AS p
    JOIN data_conns AS c
        ON c.run = p.run AND c.src_ip = p.src_ip AND c.dst_ip = p.dst_ip AND c.src_port = p.src_port
        AND c.dst_port = p.dst_port
    WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.ip_proto = 6 AND p.l4_payload_len > 0
),
first_at AS (  -- the payload offset of each instant of a connection: one row per timestamp
    SELECT conn, ts_ns, min(cum) AS cum FROM stream GROUP BY conn, ts_ns
),
on_conn AS (  -- each collective on each data connection of its link, in issue order per source
    SELECT l.*, c.conn, c.n_conns, c.payload AS conn_payload,
           l.predicted_bytes / c.n_conns + 64 AS p, l.instance_start_ns - l.err AS anchor_ns,
           row_number() OVER (PARTITION BY l.source, c.conn ORDER BY l.start_ns, l.comm, l.seq) AS i
    FROM links AS l
    JOIN data_conns AS c ON c.run = l.run AND c.src_ip = l.src_ip AND c.dst_ip = l.dst_ip
),
anchored AS (
    SELECT o.*, coalesce(f.cum, o.conn_payload)::BIGINT AS a
    FROM on_conn AS o
    ASOF LEFT JOIN first_at AS f ON f.conn = o.conn AND o.anchor_ns <= f.ts_ns
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
started AS (  -- an anchor just short of the chained start is the true start (predictions err a little)
    SELECT *,
           CASE
               WHEN a >= b - (4096 + p / 1000)
                    AND a > coalesce(lag(a) OVER (PARTITION BY source, conn ORDER BY i), -1)
               THEN a ELSE b
           END AS s
    FROM ranged
),
bounded AS MATERIALIZED (
    SELECT *, least(b + p, coalesce(lead(s) OVER (PARTITION BY source, conn ORDER BY i), b + p)) AS e
    FROM started
),
sources AS (SELECT DISTINCT run, source FROM bounded),
assigned AS (
    SELECT r.run, r.source, r.comm, r.seq, r.src_ip, r.dst_ip, s.ts_ns, s.frame_len, s.len
    FROM (SELECT s.*, x.source FROM stream AS s JOIN sources AS x ON x.run = s.run) AS s
    ASOF JOIN (SELECT * FROM bounded WHERE e > s) AS r  -- empty ranges would tie with the next
        ON r.conn = s.conn AND r.source = s.source AND r.s <= s.cum + s.half
    WHERE s.cum + s.half < r.e AND (r.instance_ranks < r.n_ranks OR s.ts_ns <= r.instance_end_ns + r.err)
),
gaps AS (
    SELECT *, ts_ns - lag(ts_ns) OVER (PARTITION BY run, source, comm, seq, src_ip, dst_ip ORDER BY ts_ns) AS gap
    FROM assigned
),
wire AS (
    SELECT run, source, comm, seq, src_ip, dst_ip, count(*) AS frames, sum(len)::BIGINT AS bytes,
           min(ts_ns) AS first_byte_ns, max(ts_ns) AS last_byte_ns,
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
       coalesce(w.frames, 0) AS frames, coalesce(w.bytes, 0) AS bytes, l.predicted_bytes,
       coalesce(w.bytes, 0) / l.predicted_bytes AS ratio, cn.connections,
       w.first_byte_ns, w.last_byte_ns, w.busy_ns,
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
