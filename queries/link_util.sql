-- Per directed worker pair: bytes and Gbit/s in contiguous, zero-filled time bins (Figs. 7, 9).
-- Kind: answer
-- Key: run, src_worker, dst_worker, t_s
-- Headline: gbps, bytes
-- Partition: run
--
-- Semantics: the notebook's utilization.json (bytes per 1 ms per directed IP pair), then ×8/1e6,
-- a 10 ms resample and /10. Fixed here: bins sit on integer UTC ns, not on row numbers of a
-- local-time pivot (the notebook placed row i at i ms whatever its timestamp, and a millisecond
-- no pair covered was missing rather than zero); every pair gets every bin from the run's first
-- to its last packet (or the window's), zeros included, at any width down to 100 µs.
-- Bins are aligned to multiples of bin_ns since the Unix epoch (pandas' resample default), so
-- the bins of different widths nest; the first bin may start up to one bin before the run's first
-- packet (t_s slightly negative) and the last may end after its last packet.
-- Gbit/s = bytes·8 / bin_ns (bits per ns).
-- The series are `link_series`'s (by_pair := true), which holds the binning and its speed notes.
-- RoCEv2 frames count like any other, by frame_len; `congestion` adds ECN-CE marks and CNPs.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms; 100 000 = 100 µs works); range (0, ∞)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start; range [0, ∞)
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end; range [0, ∞)
-- Columns:
--   run, src_worker, dst_worker   directed pair (worker labels W1..Wn); only pairs with ≥ 1 packet
--                                 between two workers in the window appear
--   bin_start_ns                  bin start, UTC ns (a multiple of bin_ns)
--   bin_ns                        bin width, ns
--   t_s                           bin start, seconds after the run's first packet
--   bytes                         sum of frame_len, bytes (L2 frames, headers included)
--   gbps                          bytes·8 / bin_ns, Gbit/s
CREATE OR REPLACE MACRO link_util(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
SELECT *
FROM link_series(bin_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := true)
ORDER BY run, src_worker, dst_worker, bin_start_ns;

CREATE OR REPLACE VIEW link_util AS SELECT * FROM link_util();
