-- title: Marker position before a step
-- description: The elapsed_s and time of a run's last logged line (current timeline) at or
--   before `step` and no more than `window` steps before it (NULL: any distance): where a
--   marker at a step with no logged line of its own is drawn. Steps rise within an attempt,
--   so the step window is pushed into the scan and keeps it to a row group or two.
-- param files: the run's metrics file ids (example: [2])
-- param run: run id (example: 'seed-cliff')
-- param step: the marker's step (example: 2000)
-- param window: how many steps back to look, NULL for any (example: 4096)
WITH lines AS (
    SELECT attempt, step, elapsed_s, "time"
    FROM (
        SELECT * FROM metric_rows
        WHERE file_id = ANY($files) AND step <= $step
          AND step >= coalesce($step - $window, -9223372036854775808)
        UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
        SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
    )
)
SELECT l.step, l.elapsed_s::DOUBLE AS elapsed_s, l."time"::DOUBLE AS "time"
FROM lines AS l
JOIN attempt_cutoffs AS c ON c.run = $run AND c.attempt = l.attempt
WHERE c.cutoff_step IS NULL OR l.step < c.cutoff_step
ORDER BY l.step DESC
LIMIT 1
