-- title: Run lines
-- description: One run's metric lines in the order they were logged (every attempt, as
--   written), after a given line id: what incident detection reads, live and on demand.
-- param run: run id (example: 'seed-cliff')
-- param after: line id already read, -1 for all (example: -1)
SELECT *
FROM metrics_all
WHERE run = $run AND line_id > $after
ORDER BY line_id
