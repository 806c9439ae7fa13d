-- title: Export marks: metrics
-- description: Per run, the highest line_id and the number of training lines (metrics_all,
--   every attempt). Lines are only ever appended and line_id only grows, so an export
--   writes a run's lines above the line_id it reached last time, up to this mark.
SELECT run, max(line_id) AS mark, count(*) AS rows
FROM metrics_all
GROUP BY run
