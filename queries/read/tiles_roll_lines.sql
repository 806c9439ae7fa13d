-- title: Roll chart tiles: lines
-- description: Stores where the tiles of one chunk of a file lie (chart_tiles): its lines
--   after rowid `after` up to `upto`, numbered from `base` in the order they were logged,
--   `tile` lines a tile. The first gap is measured from the line at `after` (`prev_*`).
-- param file: file id (example: 1)
-- param after: rowid of the line before the ones read, -1 for none (example: -1)
-- param upto: rowid of the last line read, NULL for all (example: NULL)
-- param prev_attempt: attempt of the line at `after`, for the first gap (example: NULL)
-- param prev_step: step of the line at `after` (example: NULL)
-- param prev_t: elapsed_s (else time) of the line at `after` (example: NULL)
-- param metrics: metric columns to read, and "~gap_s", "~gap_steps" for the gaps (example: ['loss', '~gap_s'])
-- param base: lines of the file rolled before this chunk (example: 0)
-- param tile: lines per tile (example: 512)
INSERT INTO chart_tiles
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
-- a tile's x span from its finite x only: inf and NaN are no place on an axis
SELECT $file, tile, "~attempt", count(*), min("~line"), max("~line"), min("~step"),
       max("~step"), min("~elapsed") FILTER (isfinite("~elapsed")),
       max("~elapsed") FILTER (isfinite("~elapsed")), min("~time") FILTER (isfinite("~time")),
       max("~time") FILTER (isfinite("~time")),
       first("~prev_step" ORDER BY "~line"), first("~prev_t" ORDER BY "~line")
FROM (SELECT *, ($base + row_number() OVER (ORDER BY "~line") - 1) // $tile AS tile FROM lines)
GROUP BY tile, "~attempt"
