-- title: Export marks: attempts
-- description: Per run, the highest row id and the number of attempts. The table is
--   only ever appended to and its row ids only grow, so an export writes a run's rows
--   above the row id it reached last time, up to this mark.
SELECT run, max(rowid) AS mark, count(*) AS rows
FROM attempts
GROUP BY run
