-- Which worker a rank ran on, by what the run folder says of ranks alone (no event source needed).
-- Kind: building block
-- Partition: run
--
-- Two ways, each giving a worker only when it names one: an NCCL log of the rank in a communicator of
-- `nranks` ranks is paired with one (nccl_rank_workers), or a capture is named `worker-<rank>-…`
-- (how tracecore's runners name rank r's capture; nranks NULL: any communicator). collective_calls
-- and collective_links ask here for ranks their source does not place otherwise.
--
-- Parameters: none.
-- Columns:
--   run, rank
--   nranks    the communicator's size the pairing holds for; NULL for a capture's name
--   worker    the worker
--   paired    'nccl log' | 'capture'
CREATE OR REPLACE VIEW collective_rank_workers AS
SELECT run, rank, nranks, any_value(worker) AS worker, 'nccl log' AS paired
FROM nccl_rank_workers
WHERE worker IS NOT NULL
GROUP BY run, rank, nranks
HAVING count(DISTINCT worker) = 1
UNION ALL
SELECT run, TRY_CAST(regexp_extract(capture, '^worker-([0-9]{1,9})([-_.]|$)', 1) AS INTEGER), NULL,
       any_value(worker), 'capture'
FROM workers
WHERE regexp_matches(capture, '^worker-[0-9]{1,9}([-_.]|$)')
GROUP BY 1, 2
HAVING count(DISTINCT worker) = 1;
