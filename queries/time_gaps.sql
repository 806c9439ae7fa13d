-- title: Time gaps
-- description: Per run, seconds and steps between consecutive logged lines and the ratio to
--   the run's typical (median) interval. The seed's 167.2 s checkpoint gap is ratio 16.7.
-- param run: run id, or NULL for every run (example: 'seed-cliff')
SELECT
    run, attempt, prev_step, step, steps, gap_s,
    median(gap_s) OVER (PARTITION BY run) AS typical_s,
    gap_s / nullif(median(gap_s) OVER (PARTITION BY run), 0) AS ratio
FROM line_gaps
WHERE ($run IS NULL OR run = $run) AND gap_s IS NOT NULL
ORDER BY run, line_id
