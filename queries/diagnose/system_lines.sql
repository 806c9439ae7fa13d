-- title: System evidence: the lines' times
-- description: The Unix time and any input-queue depth column (lower-cased name matching one
--   of the `queue` globs: hs_queue_depth, ...) of one run's lines with ids from lo to hi, and
--   no row at all for a run without system samples (table system_samples, from system.jsonl):
--   what a stall's machine evidence is matched on (app/diagnose/system.py).
-- param run: run id (example: 'seed-cliff')
-- param lo: first line id, -1 for the run's first (example: -1)
-- param hi: last line id (example: 1000000)
-- param queue: globs of input-queue depth column names (example: ['*queue*depth*'])
SELECT COLUMNS(lambda c: c IN ('line_id', 'time')
               OR len(list_filter($queue, lambda g: lower(c) GLOB g)) > 0)
FROM metrics_all
WHERE run = $run AND line_id BETWEEN $lo AND $hi
  AND EXISTS (SELECT 1 FROM system_samples AS s WHERE s.run = $run)
ORDER BY line_id
