-- title: Export marks: runs
-- description: Per run, a fingerprint of its row in `runs` (status, run.json, last seen). The
--   row changes in place while the run lives, so it is written whole again when the
--   fingerprint differs from the last export's.
SELECT run, hash(r) AS mark, 1 AS rows
FROM runs AS r
