-- collective_clock_check's check over the rows of collective_wire that a query names: rows computed once and
-- judged by several views (findings), or the whole collective_wire view.
-- Kind: building block
-- Partition: run
--
-- `wire` names a table, view or common table expression of the calling query with collective_wire's
-- columns (DuckDB's query_table); collective_clock_check computes it for its runs and calls this. What it
-- computes, its parameters and columns are collective_clock_check's.
--
-- Parameters:
--   wire    the name of collective_wire's rows (default: the view collective_wire, every run)
--   runs, err_ns   as collective_clock_check's
-- Columns: as collective_clock_check's
CREATE OR REPLACE MACRO collective_clock_check_of(wire := 'collective_wire', runs := NULL, err_ns := NULL) AS TABLE
WITH
wire_rows AS (
    SELECT * FROM query_table(wire)
    WHERE bulk_start_ns IS NOT NULL AND message_bytes >= 65536 AND (runs IS NULL OR list_contains(runs, run))
),
leads AS (
    SELECT run, source, src_file AS file, src_rank AS rank, any_value(src_worker) AS worker, count(DISTINCT seq) AS checked,
           arg_max(seq, sender_start_ns - bulk_start_ns) AS worst_seq,
           arg_max(op, sender_start_ns - bulk_start_ns) AS worst_op,
           max(sender_start_ns - bulk_start_ns) AS lead_ns
    FROM wire_rows
    GROUP BY run, source, src_file, src_rank
),
stated AS (
    SELECT l.*, k.method, coalesce(err_ns, k.error_ns, 1000000) AS error_ns
    FROM leads AS l
    LEFT JOIN collective_clocks AS k ON k.run = l.run AND k.source = l.source AND k.file = l.file
)
SELECT run, source, file, rank, worker, method, error_ns, checked, worst_seq, worst_op, lead_ns,
       lead_ns <= error_ns AS ok,
       CASE
           WHEN lead_ns <= error_ns THEN
               printf('%s rank %d (%s): clock agrees with the capture (first bytes at most %.3f ms before a start; %.3f ms allowed)',
                      file, rank, coalesce(worker, '?'), greatest(lead_ns, 0) / 1e6, error_ns / 1e6)
           ELSE
               printf('%s rank %d (%s): the bytes of %s #%d left %.3f ms before the collective''s recorded start, more than the %.3f ms its clock mapping (%s) allows: this file''s clock is off from the capture''s (or another rank''s is, pulling the instance''s start early)',
                      file, rank, coalesce(worker, '?'), worst_op, worst_seq, lead_ns / 1e6, error_ns / 1e6,
                      coalesce(method, 'unknown'))
       END AS message
FROM stated
ORDER BY run, source, file, rank;


CREATE OR REPLACE VIEW collective_clock_check_of AS
WITH every_collective_on_the_wire AS (SELECT * FROM collective_wire)
SELECT * FROM collective_clock_check_of(wire := 'every_collective_on_the_wire');
