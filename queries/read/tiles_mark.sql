-- title: Move a file's tile watermark
-- description: Records, in the transaction that stored the chunk's tiles, how many lines of
--   the file are rolled and its last rolled line (rowid `upto`), for the next chunk's gaps.
-- param file: file id (example: 1)
-- param after: rowid of the line before the ones read, -1 for none (example: -1)
-- param upto: rowid of the last line read, NULL for all (example: NULL)
-- param prev_attempt: attempt of the line at `after`, for the first gap (example: NULL)
-- param prev_step: step of the line at `after` (example: NULL)
-- param prev_t: elapsed_s (else time) of the line at `after` (example: NULL)
-- param metrics: metric columns to read, and "~gap_s", "~gap_steps" for the gaps (example: ['loss', '~gap_s'])
-- param lines: lines of the file rolled, this chunk included (example: 0)
INSERT OR REPLACE INTO chart_tile_marks
WITH src AS (
    SELECT rowid AS "~line", * FROM metric_rows
    WHERE file_id = $file AND rowid > $after AND rowid <= coalesce($upto, 9223372036854775807)
    UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
), paired AS (  -- the attempt's line before each line; before the first, the one at `after`
    -- (the gap rule for a chunk of one file, migration 0028)
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
)
SELECT $file, $lines, "~line", "~attempt", "~step", line_clock("~elapsed", "~time")
FROM lines
WHERE "~line" = $upto
