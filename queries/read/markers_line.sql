-- title: One logged line
-- description: The step, elapsed_s and time of one line of a metrics file, by its rowid
--   (metrics_all.line_id): the run's newest line, where an unfinished checkpoint ends. The
--   rowid bound is pushed into the scan.
-- param file: file id (example: 2)
-- param line: rowid of the line (example: 2229)
SELECT step, elapsed_s::DOUBLE AS elapsed_s, "time"::DOUBLE AS "time"
FROM (
    SELECT * FROM metric_rows
    WHERE file_id = $file AND rowid BETWEEN $line AND $line
    UNION ALL BY NAME  -- elapsed_s and time are columns only once a log has carried them
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time" WHERE false
)
