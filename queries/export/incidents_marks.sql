-- title: Export marks: incidents
-- description: Per run, a fingerprint of its incidents (an order-free hash of every row) and
--   their number. Incidents change in place as their episode grows, so a run's incidents are
--   written whole again when the fingerprint differs from the last export's.
SELECT run, bit_xor(hash(i)) AS mark, count(*) AS rows
FROM incidents AS i
GROUP BY run
