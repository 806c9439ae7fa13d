-- title: Attempts
-- description: Each attempt of a run (a resume from a checkpoint starts a new one): where it
--   started, the step the previous attempt had reached, why, and how far it got.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
SELECT a.run, a.attempt, a.start_step, a.prev_step, a.reason, m.lines, m.last_step,
       a.started_at
FROM attempts AS a
LEFT JOIN (
    SELECT run, attempt, count(*) AS lines, max(step) AS last_step
    FROM metrics_all GROUP BY run, attempt
) AS m USING (run, attempt)
WHERE $run IS NULL OR a.run = $run
ORDER BY a.run, a.attempt
