-- Run metadata with every optional column the views use present (NULL where ingest has none).
-- Kind: building block
-- Partition: run
--
-- Why: views read `run_meta` instead of `runs`, so a catalog written before a column existed still
-- works and that column reads NULL. UNION ALL BY NAME adds a missing column and leaves an existing
-- one as it is. The gradient size is ingest's to read from run.toml (ingest/runname.py); nothing
-- here re-derives it.
--
-- Parameters: none.
-- Columns: every column of `runs`, always including
--   run          the run's name (its folder's)
--   grad_bytes   gradient bytes all-reduced per training step, bytes; NULL if run.toml gives no size
--   n_params     model parameters; NULL if unknown
--   extra        JSON of the other run.toml keys; NULL if none
CREATE OR REPLACE VIEW run_meta AS
SELECT * FROM runs
UNION ALL BY NAME
SELECT NULL::BIGINT AS grad_bytes, NULL::BIGINT AS n_params, NULL::VARCHAR AS extra WHERE false;
