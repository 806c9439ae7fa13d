-- title: Export: a table's columns
-- description: No rows, only the columns of a table the archive holds, so an export sizes
--   how many runs' rows it reads in one query (about the same cells each time).
-- identifier table: table or view (example: metrics_all)
SELECT *
FROM {table}
LIMIT 0
