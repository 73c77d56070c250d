-- How much of each link's traffic the recorded collectives explain, over the span a source covers.
-- Kind: answer
-- Key: run, source, src_worker, dst_worker
-- Headline: matched_share, matched_bytes, payload_bytes
-- Needs: collectives
-- Partition: run
--
-- Why: a collective joined to its bytes says nothing of the bytes no collective claimed. Per source
-- and directed worker link, the span is from the earliest start of the source's collectives on the
-- link (less the clock error collective_wire allowed) to the last frame collective_wire gave them,
-- so a PyTorch trace covers its profiled steps and NCCL's plugins every collective since the
-- communicator's first. All TCP and UDP payload the link carried in that span, on every connection,
-- is compared with the bytes collective_wire attributed: what is left is traffic of no recorded
-- collective (PyTorch's store, NCCL's bootstrap, collectives the source skipped).
--
-- Parameters:
--   runs      list of run names; NULL = every run
--   err_ns    as collective_wire's (NULL = the sources' stated clock errors)
-- Columns:
--   run, source, src_worker, dst_worker   the directed link
--   collectives            the source's collectives with a prediction on the link
--   matched                those that were given at least one frame
--   span_start_ns, span_end_ns   the span, UTC ns
--   payload_bytes          TCP and UDP payload on the link in the span, bytes
--   matched_bytes          payload collective_wire attributed to the source's collectives, bytes
--   matched_share          matched_bytes / payload_bytes
--   predicted_bytes        the collectives' predicted bytes on the link, bytes
CREATE OR REPLACE MACRO collective_coverage(runs := NULL, err_ns := NULL) AS TABLE
WITH
wire AS (SELECT * FROM collective_wire(runs := runs, err_ns := err_ns)),
errs AS (
    SELECT run, source, coalesce(err_ns, max(error_ns), 1000000) AS err FROM collective_clocks GROUP BY ALL
),
spans AS (
    SELECT w.run, w.source, w.src_worker, w.dst_worker, count(*) AS collectives,
           count(*) FILTER (WHERE w.frames > 0) AS matched,
           min(w.start_ns) - coalesce(any_value(e.err), err_ns, 1000000) AS span_start_ns,
           max(w.last_byte_ns) AS span_end_ns,
           sum(w.bytes)::BIGINT AS matched_bytes, sum(w.predicted_bytes) AS predicted_bytes
    FROM wire AS w
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

CREATE OR REPLACE VIEW collective_coverage AS SELECT * FROM collective_coverage();
