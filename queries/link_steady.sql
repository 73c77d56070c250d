-- `link_series`' per-pair bins, each marked steady when it lies wholly inside the run's training window.
-- Kind: building block
-- Partition: run
--
-- Why: `contention` takes a link's reference from its steady bins and `compare` a link's mean and
-- peak load over them: set-up (connections, the first step's warm-up) and tear-down are not the
-- training's steady state. A bin is steady when bin_start_ns ≥ the first logged Batch step and
-- bin_start_ns + bin_ns ≤ the last one (`train_window`); every bin is steady in a run without a
-- training log of ≥ 2 steps.
--
-- Parameters:
--   bin_ns   bin width, ns (default 10 000 000 = 10 ms)
--   runs     list of run names; NULL = every run
--   from_ns  window start, ns after the run's first packet; NULL = run start
--   to_ns    window end (exclusive), ns after the run's first packet; NULL = run end
-- Columns: those of `link_series` (by_pair := true), plus
--   steady   the bin lies inside the training window (or the run has none)
CREATE OR REPLACE MACRO link_steady(bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL) AS TABLE
SELECT s.*,
       tw.run IS NULL OR (s.bin_start_ns >= tw.t_first AND s.bin_start_ns + s.bin_ns <= tw.t_last) AS steady
FROM link_series(bin_ns := bin_ns, runs := runs, from_ns := from_ns, to_ns := to_ns, by_pair := true) AS s
LEFT JOIN train_window(runs := runs) AS tw ON tw.run = s.run;

CREATE OR REPLACE VIEW link_steady AS SELECT * FROM link_steady();
