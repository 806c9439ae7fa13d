-- title: Chart span of raw lines
-- description: Per attempt, how many lines of one piece of a run (as in series_raw) have
--   steps in [lo, hi] and an x, and the first and last x: what the bucket layout needs.
-- param file: file id (example: 1)
-- param after: rowid of the line before the ones read, -1 for none (example: -1)
-- param upto: rowid of the last line read, NULL for all (example: NULL)
-- param attempt: only this attempt, NULL for all (example: NULL)
-- param lo: first step, NULL for open (example: NULL)
-- param hi: last step, NULL for open (example: NULL)
-- param x: step, elapsed or time (example: 'step')
WITH src AS (
    SELECT rowid AS line, * FROM metric_rows
    WHERE file_id = $file AND rowid > $after AND rowid <= coalesce($upto, 9223372036854775807)
    UNION ALL BY NAME
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
), placed AS (
    SELECT attempt, step, CASE $x WHEN 'step' THEN step::DOUBLE WHEN 'elapsed' THEN elapsed_s ELSE "time" END AS x_logged,
        -- inf and NaN are no place on an axis: such a line has no x
        CASE WHEN isfinite(x_logged) THEN x_logged END AS x
    FROM src
    WHERE ($attempt IS NULL OR attempt = $attempt)
        AND step BETWEEN coalesce($lo, step) AND coalesce($hi, step)
)
SELECT attempt, count(*) AS lines, min(x) AS x0, max(x) AS x1, min(step) AS step0,
       max(step) AS step1
FROM placed
WHERE x IS NOT NULL
GROUP BY attempt
