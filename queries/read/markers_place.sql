-- title: Marker positions at logged steps
-- description: The elapsed_s and time of a run's logged lines (its current timeline, as the
--   metrics view shows it) at exactly the steps given: where markers without a position of
--   their own (incidents, alert firings, resumes) are drawn. The step list is pushed into the
--   scan, so row groups whose step range holds none of them are skipped.
-- param files: the run's metrics file ids (example: [2])
-- param run: run id (example: 'seed-cliff')
-- param steps: steps to look up (example: [2027, 2029])
WITH lines AS (
    SELECT attempt, step, elapsed_s, "time"
    FROM (
        SELECT * FROM metric_rows
        WHERE file_id = ANY($files) AND step = ANY($steps)
        UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
        SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
    )
)
SELECT l.step, l.elapsed_s::DOUBLE AS elapsed_s, l."time"::DOUBLE AS "time"
FROM lines AS l
JOIN attempt_cutoffs AS c ON c.run = $run AND c.attempt = l.attempt
WHERE c.cutoff_step IS NULL OR l.step < c.cutoff_step
