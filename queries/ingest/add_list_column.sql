-- title: Add the buckets column
-- description: The first log with `buckets` (the length bucket of each micro-batch) adds this
--   list column (identifiers are quoted).
-- identifier table: metric_rows (example: metric_rows)
-- identifier column: buckets (example: buckets)
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} INTEGER[]
