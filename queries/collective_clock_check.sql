-- Are a source's clocks the capture's? No collective's first bytes may leave before its sender started it.
-- Kind: answer
-- Key: run, source, rank
-- Headline: ok, lead_ns, error_ns, message
-- Needs: collectives
-- Partition: run
--
-- Each source file's times were put on Unix time one way (collective_clocks: PyTorch's
-- baseTimeNanoseconds, the example plugin's GPU-clock anchor, Inspector's and Horovod's Unix µs),
-- with a stated error. The packets check it: a rank cannot send a collective's bytes before its own
-- kernel (or call) starts, so for every collective the file records, the sending rank's recorded start
-- may trail its first attributed frame of at least 1 KiB on the wire (collective_wire's bulk_start_ns;
-- anchored at the instance's earliest start over all ranks, so one rank's wrong clock does not move its
-- own bytes) by at most the stated error: small messages a source does not record (NCCL Inspector's
-- floor is 8 KiB; gloo's own) may go ahead of a collective on its connections and be taken into its
-- range, and a clock check from them would blame a clock that is right. A file whose clock runs late by more fails with its worst collective named; one
-- running early pulls the instance's start (and so the anchors) early and makes another rank's bytes
-- precede that rank's start. Collectives under 64 KiB are not checked: their few bytes may ride in a
-- neighbour's frame.
--
-- Parameters:
--   runs     list of run names; NULL = every run
--   err_ns   the allowed error, ns; NULL = each file's stated error (collective_clocks.error_ns)
-- Columns:
--   run, source, file, rank, worker     the sending rank's source file
--   method                 how the file's times were mapped (collective_clocks.method)
--   error_ns               the error allowed, ns
--   checked                collectives of the file with attributed bytes (≥ 64 KiB messages)
--   worst_seq, worst_op    the collective whose bytes lead its recorded start the most
--   lead_ns                by how much: recorded start − first attributed frame of ≥ 1 KiB, ns (≤ 0: none leads)
--   ok                     lead_ns ≤ error_ns
--   message                one line for a person: what failed, by how much, and what it means
CREATE OR REPLACE MACRO collective_clock_check(runs := NULL, err_ns := NULL) AS TABLE
WITH checked_wire AS MATERIALIZED (SELECT * FROM collective_wire(runs := runs, err_ns := err_ns))
SELECT * FROM collective_clock_check_of(wire := 'checked_wire', runs := runs, err_ns := err_ns)
ORDER BY run, source, file, rank;

CREATE OR REPLACE VIEW collective_clock_check AS SELECT * FROM collective_clock_check();
