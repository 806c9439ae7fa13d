-- title: Check a bulk insert's steps, in rowid order
-- description: check_rising.sql's answer where the rows did not come to its window in the
--   order they were inserted: how many rows did not rise above the row before (in rowid
--   order, which is the file's order), and the first and last step. Any step-back means a
--   resume inside the file: the insert is rolled back and the careful path numbers the
--   attempts. The ORDER BY sorts every row (0.07 s per million).
-- identifier table: metric_rows or ranks_all (example: metric_rows)
-- param file_id: file id (example: 1)
-- param attempt: the attempt just inserted (example: 1)
SELECT count(*) FILTER (WHERE step <= prev) AS step_backs,
       arg_min(step, r) AS first_step,
       arg_max(step, r) AS last_step,
       count(*) AS rows
FROM (
    SELECT rowid AS r, step, lag(step) OVER (ORDER BY rowid) AS prev
    FROM {table}
    WHERE file_id = $file_id AND attempt = $attempt
)
