-- Run metadata with every optional column the views use present (NULL where ingest has none).
-- Kind: building block
--
-- Why: `runs` is the ingest contract (run, framework, model, optimizer, batch_size, backend,
-- loss_pct, topology, n_workers, path) and may carry extras. Views read `run_meta` instead, so a
-- catalog without an extra still works and the dependent columns read NULL. UNION ALL BY NAME
-- adds a missing column and leaves an existing one as it is.
-- grad_bytes is taken from a `grad_bytes` column of `runs` if ingest provides one, else from the
-- `extra` JSON of run.toml keys (`grad_bytes` or `gradient_bytes` in its [run] table).
--
-- Parameters: none.
-- Columns: every column of `runs`, plus
--   grad_bytes   gradient bytes all-reduced per training step (4 × parameters for fp32), bytes; NULL if unknown
CREATE OR REPLACE VIEW run_meta AS
SELECT * REPLACE (
    coalesce(
        try_cast(grad_bytes AS BIGINT),
        try_cast(json_extract_string(extra, '$.grad_bytes') AS BIGINT),
        try_cast(json_extract_string(extra, '$.gradient_bytes') AS BIGINT)
    ) AS grad_bytes
)
FROM (
    SELECT * FROM runs
    UNION ALL BY NAME
    SELECT NULL::BIGINT AS grad_bytes, NULL::VARCHAR AS extra WHERE false
);
