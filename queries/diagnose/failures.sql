-- title: Runs that failed
-- description: Every run_end event with status `failed` stored at event rowids after `after`
--   up to `upto`, of run `run` (NULL: every run), in the order written: the crash incidents
--   diagnosis reports (app/diagnose/crash.py). `step` is the event's step, else the last step
--   the run's training lines reached; `planned` the run's planned total of steps where a log
--   says it (an event's `planned_steps`, `total_steps` or `max_steps`, else run.json's
--   `max_steps` or `total_steps`, at its top or in its `config`, or the config's `steps`);
--   `data` the whole event, whose `error` (or `message`) and `source` the evidence quotes.
-- param run: run id, NULL for every run (example: 'seed-cliff')
-- param after: the highest event rowid already judged, -1 for none (example: -1)
-- param upto: the highest event rowid to read (example: 1000000)
WITH failed AS (
    SELECT run, rowid AS event_id, step, data, file_id, "offset"
    FROM events
    WHERE rowid > $after AND rowid <= $upto AND kind = 'run_end'
      AND data->>'status' = 'failed' AND ($run IS NULL OR run = $run)
), planned AS (
    SELECT run, max(TRY_CAST(coalesce(data->>'planned_steps', data->>'total_steps',
                                      data->>'max_steps') AS BIGINT)) AS planned
    FROM events
    WHERE run IN (SELECT run FROM failed)
    GROUP BY run
), reached AS (
    SELECT run, max(last_step) AS last_step
    FROM line_files
    WHERE run IN (SELECT run FROM failed)
    GROUP BY run
)
SELECT f.run, f.event_id, coalesce(f.step, r.last_step) AS step,
       coalesce(p.planned, TRY_CAST(coalesce(
           u.meta->>'max_steps', u.meta->>'total_steps', u.meta->'config'->>'max_steps',
           u.meta->'config'->>'total_steps', u.meta->'config'->>'steps') AS BIGINT)) AS planned,
       f.data
FROM failed AS f
LEFT JOIN planned AS p USING (run)
LEFT JOIN reached AS r USING (run)
LEFT JOIN runs AS u USING (run)
ORDER BY f.run, f.file_id, f."offset"
