-- Every ordered pair of distinct workers of a run, with the integer key the hot views group by.
-- Kind: building block
-- Partition: run
--
-- Why: grouping 100 M packets by a run name and two address strings is the slowest part of a link
-- view. The views group by one integer instead,
--     pair = xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2)
-- (DuckDB hashes a Parquet dictionary or a constant partition value cheaply) and join the few
-- result rows here to get worker labels back. The shifts make the key direction-sensitive
-- (W1→W2 ≠ W2→W1) and run-specific; two pairs merge only on a 64-bit hash collision.
--
-- Parameters: none.
-- Columns:
--   run
--   src_worker, dst_worker, src_ip, dst_ip   the directed pair
--   pair                                     the key above, UBIGINT
CREATE OR REPLACE VIEW worker_pairs AS
SELECT s.run, s.worker AS src_worker, d.worker AS dst_worker, s.ip AS src_ip, d.ip AS dst_ip,
       xor(xor(hash(s.ip), hash(d.ip) >> 1), hash(s.run) >> 2) AS pair
FROM workers AS s
JOIN workers AS d ON d.run = s.run AND d.worker <> s.worker;
