-- Per-flow load in time bins: the "temporal flow" picture of Fig. 6.
-- Kind: answer
-- Key: run, flow_id, src_worker, dst_worker, t_s
-- Headline: bytes, load
-- Partition: run
--
-- Semantics: the notebook's temporal_flow.json, frame.len per directed TCP 4-tuple in 10 s bins,
-- flows numbered in sorted 4-tuple order and coloured by bytes / max bytes. Fixed here: the bins
-- sit on one grid shared by every flow (multiples of bin_ns since the Unix epoch, as in `link_util`),
-- not at each flow's own first packet, so bins of different flows line up in time; times are integer
-- UTC ns rather than local-time strings. Bins between a flow's first and last bin are zero-filled.
-- TCP only, as the paper's; RDMA queue-pair flows are `rdma_flows`.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 000 = 10 s, the paper's)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   flow_id                  1..n per run, in (src_ip, dst_ip, src_port, dst_port) order
--   src_worker, dst_worker   worker labels; NULL for an address that is not a worker
--   src_ip, dst_ip, src_port, dst_port
--   bin_start_ns             bin start, UTC ns (a multiple of bin_ns)
--   bin_ns                   bin width, ns
--   t_s                      bin start, seconds after the run's first packet
--   bytes                    sum of frame_len of the flow in the bin, bytes
--   load                     bytes / the run's largest flow-bin bytes (0..1)
CREATE OR REPLACE MACRO temporal_flows(bin_ns := 10000000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH
binned AS (
    SELECT run, src_ip, dst_ip, src_port, dst_port, ts_ns // bin_ns::BIGINT AS k, sum(frame_len)::BIGINT AS bytes
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE ip_proto = 6 AND src_port IS NOT NULL AND dst_port IS NOT NULL AND src_ip IS NOT NULL AND dst_ip IS NOT NULL
    GROUP BY ALL
),
flows AS (
    SELECT run, src_ip, dst_ip, src_port, dst_port, min(k) AS k0, max(k) AS k1,
           row_number() OVER (PARTITION BY run ORDER BY src_ip, dst_ip, src_port, dst_port) AS flow_id
    FROM binned
    GROUP BY run, src_ip, dst_ip, src_port, dst_port
),
checked AS (  -- the grid's rows, counted once the flows are known: grid_check stops one that is too large
    SELECT grid_check(sum(k1 - k0 + 1), bin_ns) AS zero FROM flows
),
filled AS (  -- `+ c.zero`: no bin is made before the check has run
    SELECT f.run, f.flow_id, f.src_ip, f.dst_ip, f.src_port, f.dst_port, g.k, coalesce(b.bytes, 0)::BIGINT AS bytes
    FROM flows AS f
    CROSS JOIN checked AS c
    CROSS JOIN range(f.k0, f.k1 + 1 + c.zero) AS g(k)
    LEFT JOIN binned AS b
        ON b.run = f.run AND b.src_ip = f.src_ip AND b.dst_ip = f.dst_ip
        AND b.src_port = f.src_port AND b.dst_port = f.dst_port AND b.k = g.k
)
SELECT
    f.run,
    f.flow_id,
    s.worker AS src_worker,
    d.worker AS dst_worker,
    f.src_ip,
    f.dst_ip,
    f.src_port,
    f.dst_port,
    f.k * bin_ns::BIGINT AS bin_start_ns,
    bin_ns::BIGINT AS bin_ns,
    (f.k * bin_ns::BIGINT - rb.start_ns) / 1e9 AS t_s,
    f.bytes,
    f.bytes / max(f.bytes) OVER (PARTITION BY f.run) AS load
FROM filled AS f
JOIN run_bounds(runs := runs) AS rb ON rb.run = f.run
LEFT JOIN workers AS s ON s.run = f.run AND s.ip = f.src_ip
LEFT JOIN workers AS d ON d.run = f.run AND d.ip = f.dst_ip
ORDER BY f.run, f.flow_id, bin_start_ns;

CREATE OR REPLACE VIEW temporal_flows AS SELECT * FROM temporal_flows();
