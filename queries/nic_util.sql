-- Per worker, NIC port and direction: bytes and Gbit/s in time bins, from the NIC counters (no packets needed).
-- Kind: answer
-- Key: run, worker, source, device, port, direction, t_s
-- Headline: gbps, bytes
-- Needs: counters
-- Partition: run
--
-- Semantics: the counter sampler's samples (`counters`, runners/counters.py): the interface's
-- /proc/net/dev bytes (source netdev: tx_bytes, rx_bytes) and its RDMA port's data counters (source
-- rdma: port_xmit_data, port_rcv_data, 4-byte words stored as bytes). Each sample's delta is spread
-- over the time since the counter's previous sample, (ts_ns − dt_ns, ts_ns], in proportion to each
-- bin's share of it (a sample that spans missed samples spreads evenly over the gap); a delta after
-- a failed read is NULL and covers nothing. Bins are aligned to multiples of bin_ns since the Unix
-- epoch, as link_util's, and may not be finer than the run's sampling interval (refused in one line).
-- What the counters count: a netdev counts every frame the interface sent or received (L2 frame
-- bytes without FCS: every protocol, ARP and IPv6 too, retransmissions included); an RDMA port
-- counts what the NIC moved (packets tcpdump never sees). A port counter has no per-flow split:
-- `link_util`'s worker pairs need packets.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms; at least the sampling interval); range (0, ∞)
--   runs     list of run names; NULL = every run
-- Columns:
--   run, worker       the run and the worker whose `worker-<i>` name the sampler's file has
--   source            netdev | rdma
--   device, port      the interface (port NULL) or RDMA device and port
--   direction         tx | rx
--   bin_start_ns      bin start, UTC ns (a multiple of bin_ns)
--   bin_ns            bin width, ns
--   t_s               bin start, seconds after the run's first packet (its first sample without packets)
--   bytes             bytes the counter moved in the bin (a sample's delta shared by time), bytes
--   gbps              bytes·8 / bin_ns, Gbit/s
--   covered           the part of the bin the samples cover (0–1; < 1 at the run's edges), fraction
CREATE OR REPLACE MACRO nic_util(bin_ns := 10000000, runs := NULL) AS TABLE
WITH spans AS (
    SELECT run, worker, source, device, port,
           CASE WHEN counter IN ('tx_bytes', 'port_xmit_data') THEN 'tx' ELSE 'rx' END AS direction,
           ts_ns - dt_ns AS t0, ts_ns AS t1, delta
    FROM counters
    WHERE (runs IS NULL OR list_contains(runs, run)) AND delta IS NOT NULL AND dt_ns > 0
      AND ((source = 'netdev' AND counter IN ('tx_bytes', 'rx_bytes'))
           OR (source = 'rdma' AND counter IN ('port_xmit_data', 'port_rcv_data')))
),
sampling AS (
    -- bins finer than a run's sampling would show its samples, not its traffic: refused
    SELECT run, max(interval_ns) AS interval_ns
    FROM counter_sources
    WHERE runs IS NULL OR list_contains(runs, run)
    GROUP BY run
    HAVING CASE WHEN max(interval_ns) > bin_ns
                THEN error(format('tracecore: nic_util: bin_ns {} is finer than run {}''s counter sampling ({} ns):'
                                  || ' give bin_ns ≥ {}', bin_ns::BIGINT, run, max(interval_ns), max(interval_ns)))
                ELSE true END
),
pieces AS (
    -- each sample's span cut at the bins it crosses (one or two pieces when bins are ≥ the interval)
    SELECT s.*, b AS bin_start_ns,
           least(s.t1, b + bin_ns) - greatest(s.t0, b) AS overlap_ns
    FROM spans AS s, unnest(range((s.t0 // bin_ns) * bin_ns, s.t1, bin_ns::BIGINT)) AS u(b)
),
origin AS (
    SELECT o.run, coalesce(min(c.first_ts_ns), min(o.t0)) AS start_ns
    FROM spans AS o
    LEFT JOIN captures AS c ON c.run = o.run AND c.first_ts_ns IS NOT NULL
    GROUP BY o.run
)
SELECT p.run, p.worker, p.source, p.device, p.port, p.direction, p.bin_start_ns, bin_ns::BIGINT AS bin_ns,
       (p.bin_start_ns - any_value(o.start_ns)) / 1e9 AS t_s,
       sum(p.delta * p.overlap_ns / (p.t1 - p.t0)) AS bytes,
       sum(p.delta * p.overlap_ns / (p.t1 - p.t0)) * 8 / bin_ns AS gbps,
       sum(p.overlap_ns) / bin_ns AS covered
FROM pieces AS p
JOIN origin AS o ON o.run = p.run
JOIN sampling AS g ON g.run = p.run
GROUP BY p.run, p.worker, p.source, p.device, p.port, p.direction, p.bin_start_ns
ORDER BY p.run, p.worker, p.source, p.device, p.port, p.direction, p.bin_start_ns;

CREATE OR REPLACE VIEW nic_util AS SELECT * FROM nic_util();
