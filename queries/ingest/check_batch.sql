-- title: Check a batched insert, file by file
-- description: After ingest/insert_batch, inside the same transaction: for each file, its
--   rows, how many did not rise above the row before (in the order inserted, the file's
--   order), and its first and last step. The caller compares them with each file's line
--   count and first line before it commits.
-- param file_ids: the files just inserted, each as its first attempt (example: [1, 2])
-- param low: the lowest of them (lets DuckDB skip row groups by their zone maps) (example: 1)
-- param high: the highest of them (example: 2)
SELECT file_id,
       count(*) AS rows,
       count(*) FILTER (WHERE step <= prev) AS step_backs,
       arg_min(step, r) AS first_step,
       arg_max(step, r) AS last_step
FROM (
    SELECT rowid AS r, file_id, step, lag(step) OVER (PARTITION BY file_id ORDER BY rowid) AS prev
    FROM metric_rows
    WHERE attempt = 1 AND file_id BETWEEN $low AND $high
      AND file_id IN (SELECT unnest($file_ids))
)
GROUP BY file_id
