-- title: Chart series from raw lines
-- description: One piece of a run's lines (one file's rows after rowid `after` up to `upto`,
--   of one attempt or all) as chart buckets per metric and attempt: lines with a value, NaN
--   and inf among them, finite min and max with their steps, sum, the first x and step.
--   Bucket edges come from the layout lists; an attempt not in them gets one row per line.
--   Only lines with steps in [lo, hi] and an x count; gaps are measured from the line before.
-- param file: file id (example: 1)
-- param after: rowid of the line before the ones read, -1 for none (example: -1)
-- param upto: rowid of the last line read, NULL for all (example: NULL)
-- param prev_attempt: attempt of the line at `after`, for the first gap (example: NULL)
-- param prev_step: step of the line at `after` (example: NULL)
-- param prev_t: elapsed_s (else time) of the line at `after` (example: NULL)
-- param metrics: metric columns to read, and "~gap_s", "~gap_steps" for the gaps (example: ['loss', '~gap_s'])
-- param attempt: only this attempt, NULL for all (example: NULL)
-- param lo: first step, NULL for open (example: NULL)
-- param hi: last step, NULL for open (example: NULL)
-- param x: step, elapsed or time (example: 'step')
-- param attempts: per attempt bucketed: its number (example: [1])
-- param x0s: where its first bucket starts on x (example: [0.0])
-- param widths: bucket width on x (example: [1.0])
-- param buckets: number of buckets (example: [10])
WITH src AS (
    SELECT rowid AS "~line", * FROM metric_rows
    WHERE file_id = $file AND rowid > $after AND rowid <= coalesce($upto, 9223372036854775807)
    UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
), paired AS (  -- the attempt's line before each line; before the first, the one at `after`
    -- (the gap rule, migration 0028; one window, one sort: every lag is over the same one)
    SELECT *, line_clock(elapsed_s, "time") AS "~t",
        line_before_or(step, attempt, "~line", $prev_attempt, $prev_step) AS "~prev_step",
        line_before_or(line_clock(elapsed_s, "time"), attempt, "~line",
                       $prev_attempt, $prev_t) AS "~prev_t"
    FROM src
), lines AS (
    SELECT "~line", attempt AS "~attempt", step AS "~step", elapsed_s AS "~elapsed",
        "time" AS "~time", "~prev_step", "~prev_t",
        (step - "~prev_step")::DOUBLE AS "~gap_steps", "~t" - "~prev_t" AS "~gap_s",
        -- `OR c = 'step'`: never an empty set of columns (gaps alone); UNPIVOT leaves it out
        COLUMNS(lambda c: list_contains($metrics, c) OR c = 'step')::DOUBLE
    FROM paired
), placed AS (
    SELECT *, CASE $x WHEN 'step' THEN "~step"::DOUBLE WHEN 'elapsed' THEN "~elapsed" ELSE "~time" END AS "~x_logged",
        -- inf and NaN are no place on an axis: such a line has no x
        CASE WHEN isfinite("~x_logged") THEN "~x_logged" END AS "~x"
    FROM lines
    WHERE ($attempt IS NULL OR "~attempt" = $attempt)
        AND "~step" BETWEEN coalesce($lo, "~step") AND coalesce($hi, "~step")
), bucketed AS (  -- list_position, not a join on the layout: half the time
    SELECT *, list_position($attempts, "~attempt") AS "~i",
        CASE WHEN "~i" IS NULL THEN -1 - "~line"  -- one row per line
             ELSE greatest(0, least($buckets["~i"] - 1,
                                    floor(("~x" - $x0s["~i"]) / $widths["~i"])))::BIGINT
        END AS "~bucket"
    FROM placed
    WHERE "~x" IS NOT NULL
), unpivoted AS (
    UNPIVOT (SELECT "~bucket", "~attempt", "~step", "~x", COLUMNS(lambda c: list_contains($metrics, c)) FROM bucketed)
    ON COLUMNS(lambda c: list_contains($metrics, c)) INTO NAME metric VALUE value
)
-- aggregates over `finite` (NULL where the value is NaN or inf) rather than FILTER clauses:
-- the same numbers (UNPIVOT drops NULL values) in about half the time
SELECT metric, "~attempt" AS attempt, "~bucket" AS bucket, min("~x") AS x, min("~step") AS step,
       count(*) AS n, count(*) - count(finite) AS nonfinite, min(finite) AS lo, max(finite) AS hi,
       arg_min("~step", finite) AS lo_step, arg_max("~step", finite) AS hi_step,
       sum(finite) AS sum, any_value(value) AS raw
FROM (SELECT *, CASE WHEN isfinite(value) THEN value END AS finite FROM unpivoted)
GROUP BY metric, "~attempt", "~bucket"
