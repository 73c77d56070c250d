-- Every ordered pair of distinct workers of a run, with the integer key the binned views group by.
--
-- Why: grouping 100 M packets by two address strings is the slowest part of a link view. The views
-- group by `pair` = xor(hash(src_ip), hash(dst_ip) >> 1) instead (DuckDB hashes a Parquet
-- dictionary once per entry) and join the few result rows here to get worker labels back.
-- The shift makes the key direction-sensitive (W1→W2 ≠ W2→W1).
--
-- Parameters: none.
-- Columns:
--   run
--   src_worker, dst_worker, src_ip, dst_ip   the directed pair
--   pair                                     xor(hash(src_ip), hash(dst_ip) >> 1), UBIGINT
CREATE OR REPLACE VIEW worker_pairs AS
SELECT s.run, s.worker AS src_worker, d.worker AS dst_worker, s.ip AS src_ip, d.ip AS dst_ip,
       xor(hash(s.ip), hash(d.ip) >> 1) AS pair
FROM workers AS s
JOIN workers AS d ON d.run = s.run AND d.worker <> s.worker;
