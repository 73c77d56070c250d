-- collective_coverage's check over the rows of collective_wire that a query names: rows computed once and
-- judged by several views (findings), or the whole collective_wire view.
-- Kind: building block
-- Partition: run
--
-- `wire` names a table, view or common table expression of the calling query with collective_wire's
-- columns (DuckDB's query_table); collective_coverage computes it for its runs and calls this. What it
-- computes, its parameters and columns are collective_coverage's.
--
-- Parameters:
--   wire    the name of collective_wire's rows (default: the view collective_wire, every run)
--   runs, err_ns   as collective_coverage's
-- Columns: as collective_coverage's
CREATE OR REPLACE MACRO collective_coverage_of(wire := 'collective_wire', runs := NULL, err_ns := NULL) AS TABLE
WITH
wire_rows AS (SELECT * FROM query_table(wire) WHERE runs IS NULL OR list_contains(runs, run)),
errs AS (
    SELECT run, source, coalesce(err_ns, max(error_ns), 1000000) AS err FROM collective_clocks GROUP BY ALL
),
spans AS (
    SELECT w.run, w.source, w.src_worker, w.dst_worker, count(*) AS collectives,
           count(*) FILTER (WHERE w.frames > 0) AS matched,
           min(w.start_ns) - coalesce(any_value(e.err), err_ns, 1000000) AS span_start_ns,
           max(w.last_byte_ns) AS span_end_ns,
           sum(w.bytes + w.resent_bytes)::BIGINT AS matched_bytes, sum(w.predicted_bytes) AS predicted_bytes
    FROM wire_rows AS w
    LEFT JOIN errs AS e ON e.run = w.run AND e.source = w.source
    GROUP BY w.run, w.source, w.src_worker, w.dst_worker
),
carried AS (
    SELECT s.run, s.source, s.src_worker, s.dst_worker, coalesce(sum(p.l4_payload_len), 0)::BIGINT AS payload_bytes
    FROM spans AS s
    JOIN workers AS a ON a.run = s.run AND a.worker = s.src_worker
    JOIN workers AS b ON b.run = s.run AND b.worker = s.dst_worker
    LEFT JOIN packets AS p
        ON p.run = s.run AND p.src_ip = a.ip AND p.dst_ip = b.ip AND p.ip_proto IN (6, 17)
        AND p.ts_ns BETWEEN s.span_start_ns AND s.span_end_ns
    GROUP BY ALL
)
SELECT s.run, s.source, s.src_worker, s.dst_worker, s.collectives, s.matched, s.span_start_ns, s.span_end_ns,
       c.payload_bytes, s.matched_bytes, s.matched_bytes / nullif(c.payload_bytes, 0) AS matched_share,
       s.predicted_bytes
FROM spans AS s
JOIN carried AS c USING (run, source, src_worker, dst_worker)
ORDER BY s.run, s.source, s.src_worker, s.dst_worker;


CREATE OR REPLACE VIEW collective_coverage_of AS
WITH every_collective_on_the_wire AS (SELECT * FROM collective_wire)
SELECT * FROM collective_coverage_of(wire := 'every_collective_on_the_wire');
