-- title: Run lines
-- description: One run's metric lines in the order they were logged (every attempt, as
--   written), after a given line id: what incident detection reads, live and on demand. Each
--   line carries last_eval_step, the highest step at or below its own with an evaluation row
--   (table evals, kind 'eval'), or NULL: a gap whose line before it sits at or below that step
--   held an evaluation pass, judged against the run's other evaluation gaps (detect.py). The
--   row was logged before the line, so a live tick reads the same value as the whole run.
-- param run: run id (example: 'seed-cliff')
-- param after: line id already read, -1 for all (example: -1)
SELECT m.*, e.step AS last_eval_step
FROM metrics_all AS m
ASOF LEFT JOIN (SELECT run, step FROM evals WHERE kind = 'eval') AS e
    ON m.run = e.run AND m.step >= e.step
WHERE m.run = $run AND m.line_id > $after
ORDER BY m.line_id
