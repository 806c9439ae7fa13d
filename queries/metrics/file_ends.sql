-- title: Prometheus: newest line of each metrics file
-- description: The rowid of the newest stored line of each file named past `after` (NULL when
--   none): its chart-tile watermark (the rowid of its last rolled line, -1 for none), or what
--   the previous scrape saw (app/read/prometheus.py Anchors), so a long run costs only its
--   newest lines. The scan is bounded by constants DuckDB pushes
--   into it and checks against each row group's statistics: rowids above `floor` (the
--   smallest watermark) and file ids between the smallest and largest named, so the row
--   groups of runs ingested before or after are skipped unread.
-- param files: metrics file ids (example: [2])
-- param after: each file's watermark, in the same order (example: [-1])
-- param floor: the smallest of `after` (example: -1)
-- param first_file: the smallest of `files` (example: 2)
-- param last_file: the largest of `files` (example: 2)
WITH wanted AS (
    SELECT unnest($files) AS file_id, unnest($after) AS after
), lines AS (
    SELECT rowid AS line_id, file_id
    FROM metric_rows
    WHERE rowid > $floor AND file_id BETWEEN $first_file AND $last_file
)
SELECT w.file_id, max(l.line_id) AS last_line
FROM wanted AS w
LEFT JOIN lines AS l ON l.file_id = w.file_id AND l.line_id > w.after
GROUP BY w.file_id
