-- title: A metric's trailing values
-- description: The last finite values of one metric of a run up to a line id, newest first:
--   rebuilds a change rule's trailing window after a restart.
-- param run: run id (example: 'seed-cliff')
-- param before: last line id to include (example: 1000000)
-- param n: how many values (example: 20)
-- identifier column: the metric column (example: loss)
SELECT {column} AS value
FROM metrics_all
WHERE run = $run AND line_id <= $before AND isfinite({column})
ORDER BY line_id DESC
LIMIT $n
