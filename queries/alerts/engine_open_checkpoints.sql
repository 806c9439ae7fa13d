-- title: Checkpoint saves still open
-- description: For each run named, its latest checkpoint_start when it is the last thing
--   the run did: no event came after it (its checkpoint_end, a run_end, a relaunch's
--   run_start or resume: torchtitan's last-step save whose end line never comes, followed by
--   'Training completed') and no metrics line logged a later step (a save the loop is
--   blocked in).
-- param runs: run ids (example: ['seed-cliff'])
WITH starts AS (
    SELECT run, rowid AS id, step, "time", data->>'path' AS path,
           row_number() OVER (PARTITION BY run ORDER BY rowid DESC) AS back
    FROM events
    WHERE list_contains($runs, run) AND kind = 'checkpoint_start'
)
SELECT s.run, s.step, s."time", s.path
FROM starts AS s
WHERE s.back = 1
  AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.run = s.run AND e.rowid > s.id)
  AND (s.step IS NULL OR s.step >= coalesce(
        (SELECT max(f.last_step) FROM line_files AS f WHERE f.run = s.run),
        s.step))
