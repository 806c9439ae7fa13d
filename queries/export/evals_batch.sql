-- title: Export rows of many runs: evals
-- description: The evaluation and summary rows (evals) of many runs in one query: of runs[i],
--   those with a line_id in (after[i], upto[i]]. Grouped by run in the order the runs are
--   given, each run's rows in the order they were stored, so the export cuts the answer into
--   one part per run.
-- param runs: run ids (example: ['seed-cliff'])
-- param after: per run, the highest line_id already exported, -1 for none (example: [-1])
-- param upto: per run, the highest line_id to export (example: [1000000000])
WITH marks AS (
    SELECT unnest($runs) AS run, unnest($after) AS after, unnest($upto) AS upto,
           unnest(range(len($runs))) AS position
)
SELECT t.*
FROM evals AS t
JOIN marks AS m ON t.run = m.run AND t.line_id > m.after AND t.line_id <= m.upto
ORDER BY m.position, t.line_id
