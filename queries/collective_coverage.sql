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
--   matched_bytes          payload collective_wire attributed to the source's collectives, re-sent
--                          bytes included (the payload counts every copy), bytes
--   matched_share          matched_bytes / payload_bytes
--   predicted_bytes        the collectives' predicted bytes on the link, bytes
CREATE OR REPLACE MACRO collective_coverage(runs := NULL, err_ns := NULL) AS TABLE
WITH covered_wire AS MATERIALIZED (SELECT * FROM collective_wire(runs := runs, err_ns := err_ns))
SELECT * FROM collective_coverage_of(wire := 'covered_wire', runs := runs, err_ns := err_ns)
ORDER BY run, source, src_worker, dst_worker;

CREATE OR REPLACE VIEW collective_coverage AS SELECT * FROM collective_coverage();
