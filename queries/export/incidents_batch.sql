-- title: Export rows of many runs: incidents
-- description: In one query, every incident of each of many runs as it stands now, grouped by
--   run in the order the runs are given, so the export cuts the answer into one part per run.
-- param runs: run ids (example: ['seed-cliff'])
WITH wanted AS (
    SELECT unnest($runs) AS run, unnest(range(len($runs))) AS position
)
SELECT t.*
FROM incidents AS t
JOIN wanted AS w ON t.run = w.run
ORDER BY w.position, t.step, t.kind, t.metric
