-- Each NCCL rank of a run (one row per rank's log and communicator) with the captured worker it ran on.
-- Kind: building block
-- Partition: run
--
-- A rank's log (table nccl_ranks) is paired with a worker two ways:
--   by name     ingest fills nccl_ranks.worker when the log is named `worker-<i>-…`, like the
--               capture `worker-<i>-tcpdump.pcap` of that worker;
--   by address  the worker whose IP is one of the addresses the log names (its RoCE GID first,
--               then NET/Socket devices, then the bootstrap interface).
-- The name wins when both are known: it is what the run folder says. When the two name different
-- workers the log lies beside another worker's capture (or the capture is another host's), and
-- `pairing` says 'contradicts'.
--
-- Parameters: none.
-- Columns:
--   run, comm_id, rank, nranks   the rank in its communicator (comm_id NULL when NCCL did not print it)
--   file, host, pid              the log file (name in its run folder), NCCL's host name and process
--   name_worker                  worker paired by file name; NULL when the log is not named so
--   address_worker, address      worker whose IP the log names, and that IP; NULL when none
--   worker                       name_worker, else address_worker; NULL when unpaired
--   pairing                      'name and address' | 'name' | 'address' | 'contradicts' | 'unpaired'
CREATE OR REPLACE VIEW nccl_rank_workers AS
WITH by_address AS (
    SELECT r.run, r.file, r.pid, r.comm,
           arg_min(w.worker, list_position(r.addresses, w.ip)) AS address_worker,
           arg_min(w.ip, list_position(r.addresses, w.ip)) AS address
    FROM nccl_ranks AS r
    JOIN workers AS w ON w.run = r.run AND list_contains(r.addresses, w.ip)
    GROUP BY r.run, r.file, r.pid, r.comm
)
SELECT r.run, r.comm_id, r.rank, r.nranks, r.file, r.host, r.pid,
       r.worker AS name_worker, a.address_worker, a.address,
       coalesce(r.worker, a.address_worker) AS worker,
       CASE
           WHEN r.worker IS NULL AND a.address_worker IS NULL THEN 'unpaired'
           WHEN r.worker IS NULL THEN 'address'
           WHEN a.address_worker IS NULL THEN 'name'
           WHEN r.worker = a.address_worker THEN 'name and address'
           ELSE 'contradicts'
       END AS pairing
FROM nccl_ranks AS r
LEFT JOIN by_address AS a ON a.run = r.run AND a.file = r.file AND a.pid = r.pid AND a.comm = r.comm;
