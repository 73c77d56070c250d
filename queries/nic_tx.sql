-- Each worker's NIC transmit counter, sample by sample: what its NIC sent, where no packet says.
-- Kind: building block
-- Partition: run
--
-- The one choice of counter for the views that read what a worker sent from its NIC (data_per_step
-- for a run without packets, collective_nic, collective_verdicts' NIC rule): its RDMA port's
-- port_xmit_data (4-byte words, stored as bytes) where the worker's sampler found an RDMA port, else
-- its interface's tx_bytes (/proc/net/dev: every frame the interface sent); never both, which would
-- count RoCE traffic twice on a NIC whose netdev counts it too. Samples after a failed read (delta
-- NULL) are kept, as are those of a gap (dt_ns spans it).
--
-- Parameters:
--   runs   list of run names; NULL = every run
-- Columns:
--   run, worker   the run and the worker whose sampler file it is
--   counter       port_xmit_data | tx_bytes
--   t0, t1        the time the sample's delta covers, (t0, t1] = (ts_ns − dt_ns, ts_ns], UTC ns
--   delta         bytes sent in it, bytes; NULL after a failed read
--   k             the sample's number among the worker's, from 1 in time order
CREATE OR REPLACE MACRO nic_tx(runs := NULL) AS TABLE
SELECT c.run, c.worker, c.counter, c.ts_ns - c.dt_ns AS t0, c.ts_ns AS t1, c.delta,
       row_number() OVER (PARTITION BY c.run, c.worker ORDER BY c.ts_ns) AS k
FROM counters AS c
WHERE (runs IS NULL OR list_contains(runs, c.run)) AND c.dt_ns > 0 AND c.worker IS NOT NULL
  AND ((c.source = 'rdma' AND c.counter = 'port_xmit_data')
       OR (c.source = 'netdev' AND c.counter = 'tx_bytes' AND NOT EXISTS (
           SELECT 1 FROM counters AS r WHERE r.run = c.run AND r.worker = c.worker AND r.source = 'rdma')));

CREATE OR REPLACE VIEW nic_tx AS SELECT * FROM nic_tx();
