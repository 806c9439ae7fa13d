-- title: New metric lines
-- description: Every run's metric lines with a line id after `after` and up to `upto`, run by
--   run in the order they were logged (every attempt, as written): what live diagnosis judges
--   on a tick, for all runs in one query (diagnose/changes gives `upto`). Line ids are
--   metric_rows' rowids, so DuckDB reads only the row groups that hold the range. Each line's
--   last_eval_step is run_lines' (the highest step at or below its own with an evaluation row).
-- param after: the highest line id already judged, -1 for none (example: -1)
-- param upto: the highest line id to read (example: 1000000)
SELECT m.*, e.step AS last_eval_step
FROM metrics_all AS m
ASOF LEFT JOIN (SELECT run, step FROM evals WHERE kind = 'eval') AS e
    ON m.run = e.run AND m.step >= e.step
WHERE m.line_id > $after AND m.line_id <= $upto
ORDER BY m.run, m.line_id
