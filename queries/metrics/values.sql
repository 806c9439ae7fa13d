-- title: Prometheus: newest values
-- description: The newest value of each metric named, per metrics file, among the rowids
--   `window` below that file's newest line (`last`): the value of the newest line that logged
--   it (NULLs, a line that did not log the metric, are skipped). The scan is bounded by
--   constants DuckDB pushes into it: rowids from `floor` (the smallest `last` minus `window`)
--   and file ids between the smallest and largest named.
-- param files: metrics file ids (example: [2])
-- param last: the rowid of each file's newest line, in the same order (example: [10])
-- param names: metric columns (example: ['loss'])
-- param window: rowids looked back from a file's newest line (example: 8192)
-- param floor: the smallest `last` minus `window` (example: 0)
-- param first_file: the smallest of `files` (example: 2)
-- param last_file: the largest of `files` (example: 2)
WITH wanted AS (
    SELECT unnest($files) AS file_id, unnest($last) AS last
), tail AS (
    SELECT m.*
    FROM (
        SELECT rowid AS line_id, * FROM metric_rows
        WHERE rowid >= $floor AND file_id BETWEEN $first_file AND $last_file
    ) AS m
    JOIN wanted AS w ON m.file_id = w.file_id AND m.line_id BETWEEN w.last - $window AND w.last
)
SELECT file_id, metric, arg_max(value, line_id) AS value
FROM (UNPIVOT tail ON COLUMNS(lambda c: list_contains($names, c)) INTO NAME metric VALUE value)
GROUP BY file_id, metric
ORDER BY file_id, metric
