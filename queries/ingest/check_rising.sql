-- title: Check a bulk insert's steps
-- description: After a log was read whole by the fast path, inside the same transaction: how
--   many rows did not rise above the row before (in the order they were inserted, which is
--   the file's order), the first and last step, and how many rows came to the window out of
--   rowid order. Any step-back means a resume inside the file: the insert is rolled back and
--   the careful path numbers the attempts. An empty OVER () is DuckDB's streaming window,
--   which reads the table in one ordered pass (about 0.005 s per million rows, where sorting
--   by rowid took 0.07 s); out_of_order says whether that order was rowid's, and where it
--   was not, check_rising_sorted.sql answers instead.
-- identifier table: metric_rows or ranks_all (example: metric_rows)
-- param file_id: file id (example: 1)
-- param attempt: the attempt just inserted (example: 1)
SELECT count(*) FILTER (WHERE step <= prev) AS step_backs,
       arg_min(step, r) AS first_step,
       arg_max(step, r) AS last_step,
       count(*) AS rows,
       count(*) FILTER (WHERE r <= prev_r) AS out_of_order
FROM (
    SELECT rowid AS r, step, lag(step) OVER () AS prev, lag(rowid) OVER () AS prev_r
    FROM {table}
    WHERE file_id = $file_id AND attempt = $attempt
)
