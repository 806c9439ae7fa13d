-- title: Run summary
-- description: One line per run: how far it got, how long it took, its latest and best loss,
--   attempts, checkpoints, epochs, incidents and ingest errors.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
-- param metric: the loss metric to summarise, a column every run has (default: 'loss') (example: 'loss')
SELECT
    r.run, r.status,
    m.lines, m.first_step, m.last_step, m.elapsed_s, m.attempts,
    m.last_loss, m.best_loss,
    (SELECT count(*) FROM events e WHERE e.run = r.run AND e.kind = 'checkpoint_end')
        AS checkpoints,
    (SELECT count(*) FROM events e WHERE e.run = r.run AND e.kind = 'epoch_start') AS epochs,
    (SELECT count(*) FROM incidents i WHERE i.run = r.run) AS incidents,
    (SELECT count(*) FROM ingest_errors x WHERE x.run = r.run) AS ingest_errors,
    r.last_seen
FROM runs AS r
LEFT JOIN (
    SELECT run, count(*) AS lines, min(step) AS first_step, max(step) AS last_step,
           max(line_clock(elapsed_s, "time")) - min(line_clock(elapsed_s, "time")) AS elapsed_s,
           count(DISTINCT attempt) AS attempts,
           arg_max(COLUMNS(lambda c: c = coalesce($metric, 'loss')), step) AS last_loss,
           min(COLUMNS(lambda c: c = coalesce($metric, 'loss'))) AS best_loss
    FROM metrics
    GROUP BY run
) AS m USING (run)
WHERE $run IS NULL OR r.run = $run
ORDER BY r.run
