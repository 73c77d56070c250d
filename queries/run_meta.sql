-- Run metadata with every optional column the views use present (NULL where ingest has none).
--
-- Why: `runs` is the ingest contract (run, framework, model, optimizer, batch_size, backend,
-- loss_pct, topology, n_workers, path) and may carry extras such as `grad_bytes` from a bench
-- run's run.toml. Views read `run_meta` instead, so a catalog without the extra still works and
-- the dependent columns read NULL. UNION ALL BY NAME adds a missing column and leaves an
-- existing one as it is.
--
-- Parameters: none.
-- Columns: every column of `runs`, plus
--   grad_bytes   gradient bytes all-reduced per training step (4 × parameters for fp32), bytes; NULL if unknown
CREATE OR REPLACE VIEW run_meta AS
SELECT * FROM runs
UNION ALL BY NAME
SELECT NULL::BIGINT AS grad_bytes WHERE false;
