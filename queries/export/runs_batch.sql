-- title: Export rows of many runs: runs
-- description: In one query, the row of `runs` of each of many runs (status, run.json as
--   `meta`, first and last seen), grouped by run in the order the runs are given, so the
--   export cuts the answer into one part per run.
-- param runs: run ids (example: ['seed-cliff'])
WITH wanted AS (
    SELECT unnest($runs) AS run, unnest(range(len($runs))) AS position
)
SELECT t.*
FROM runs AS t
JOIN wanted AS w ON t.run = w.run
ORDER BY w.position
