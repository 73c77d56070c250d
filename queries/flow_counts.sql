-- Flows per run under five definitions, side by side (Fig. 5, and RDMA queue pairs).
-- Kind: answer
-- Key: run, definition
-- Headline: flows
-- Partition: run
--
-- Semantics: the paper counted len(groupby(ip.src, ip.dst, tcp.srcport, tcp.dstport)) over the
-- whole capture, a *directed* TCP 4-tuple, so every TCP connection counts twice (data and ACK
-- direction, each captured at its sender). That count is kept as `4tuple`; the others say what
-- it means:
--   4tuple      directed (src_ip, dst_ip, src_port, dst_port), TCP only (the paper's)
--   5tuple      directed (src_ip, dst_ip, ip_proto, src_port, dst_port), any protocol with ports
--   connection  bidirectional: both directions of a 5-tuple count once
--   hostpair    unordered address pair, any IP traffic
--   qp          directed (src_ip, dst_ip, rdma_dest_qp) of RoCE packets: the flows of `rdma_flows`
--               (RoCE v1 and InfiniBand-side frames have no IP addresses: their QPs count once per
--               destination QP, as there)
-- Packets without ports (non-first fragments, ICMP, …) count only for `hostpair`, RoCE packets without
-- IP only for `qp`. RoCEv2 is UDP and counts in `5tuple` and `connection` by its ports too, but both
-- directions of a QP connection go to port 4791 from the same source port, so neither is the other's
-- reversed 5-tuple and `connection` counts each direction: `rdma_flows` pairs them.
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   definition   '4tuple' | '5tuple' | 'connection' | 'hostpair' | 'qp'
--   flows        number of distinct flows under that definition
CREATE OR REPLACE MACRO flow_counts(runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
WITH tuples AS (
    SELECT DISTINCT run, src_ip, dst_ip, ip_proto, src_port, dst_port, rdma_dest_qp
    FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)
    WHERE (src_ip IS NOT NULL AND dst_ip IS NOT NULL) OR rdma_dest_qp IS NOT NULL
),
counts AS (
    SELECT
        run,
        count(DISTINCT (src_ip, dst_ip, src_port, dst_port))
            FILTER (WHERE ip_proto = 6 AND src_port IS NOT NULL AND dst_port IS NOT NULL) AS "4tuple",
        count(DISTINCT (src_ip, dst_ip, ip_proto, src_port, dst_port))
            FILTER (WHERE src_port IS NOT NULL AND dst_port IS NOT NULL) AS "5tuple",
        count(DISTINCT CASE WHEN (src_ip, src_port) <= (dst_ip, dst_port)
                            THEN (ip_proto, src_ip, src_port, dst_ip, dst_port)
                            ELSE (ip_proto, dst_ip, dst_port, src_ip, src_port) END)
            FILTER (WHERE src_port IS NOT NULL AND dst_port IS NOT NULL) AS connection,
        count(DISTINCT (least(src_ip, dst_ip), greatest(src_ip, dst_ip)))
            FILTER (WHERE src_ip IS NOT NULL AND dst_ip IS NOT NULL) AS hostpair,
        count(DISTINCT (src_ip, dst_ip, rdma_dest_qp)) FILTER (WHERE rdma_dest_qp IS NOT NULL) AS qp
    FROM tuples
    GROUP BY run
)
SELECT run, definition, flows
FROM counts
UNPIVOT (flows FOR definition IN ("4tuple", "5tuple", connection, hostpair, qp))
ORDER BY run, list_position(['4tuple', '5tuple', 'connection', 'hostpair', 'qp'], definition);

CREATE OR REPLACE VIEW flow_counts AS SELECT * FROM flow_counts();
