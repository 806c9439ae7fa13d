-- title: System evidence: the input queue's depth
-- description: Every input-queue depth column (lower-cased name matching one of the `queue`
--   globs: hs_queue_depth, ...) of one run's lines with ids from lo to hi: read only when
--   the GPUs idled there, to tell an empty input queue (app/diagnose/system.py).
-- param run: run id (example: 'seed-cliff')
-- param lo: first line id, -1 for the run's first (example: -1)
-- param hi: last line id (example: 1000000)
-- param queue: globs of input-queue depth column names (example: ['*queue*depth*'])
SELECT COLUMNS(lambda c: c = 'line_id'
               OR len(list_filter($queue, lambda g: lower(c) GLOB g)) > 0)
FROM metrics_all
WHERE run = $run AND line_id BETWEEN $lo AND $hi
ORDER BY line_id
