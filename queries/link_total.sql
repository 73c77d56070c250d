-- All traffic of a run together: bytes and Gbit/s in contiguous, zero-filled time bins.
-- Kind: answer
-- Key: run, t_s
-- Headline: gbps, bytes
-- Partition: run
--
-- Semantics: the notebook's (misnamed) bytes_per_sec.json, total frame.len of every packet of the
-- run per 1 ms bin, zero-filled from first to last packet. Fixed here: integer UTC ns instead of
-- naive local-time strings, any bin width. Unlike `link_util`, traffic to or from non-workers
-- counts too, as it did there. Bins are aligned to multiples of bin_ns since the Unix epoch, as
-- in `link_util` (the first may start up to one bin before the run's first packet): both are
-- `link_series`, here with one series per run (by_pair := false).
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns:
--   run
--   bin_start_ns   bin start, UTC ns (a multiple of bin_ns)
--   bin_ns         bin width, ns
--   t_s            bin start, seconds after the run's first packet
--   bytes          sum of frame_len in the bin, bytes
--   gbps           bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_total(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
SELECT * EXCLUDE (src_worker, dst_worker)
FROM link_series(bin_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := false)
ORDER BY run, bin_start_ns;

CREATE OR REPLACE VIEW link_total AS SELECT * FROM link_total();
