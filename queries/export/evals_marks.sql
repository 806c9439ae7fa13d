-- title: Export marks: evals
-- description: Per run, the highest line_id and the number of evaluation and summary rows
--   (evals). They are only ever appended, so an export writes a run's rows above the
--   line_id it reached last time, up to this mark.
SELECT run, max(line_id) AS mark, count(*) AS rows
FROM evals
GROUP BY run
