-- title: Add the overflow column
-- description: Once a table has max_metric_columns metric columns, further keys are kept in
--   this map column, key -> value (read one as extra_metrics['key']); identifiers are quoted.
-- identifier table: metric_rows or ranks_all (example: metric_rows)
-- identifier column: extra_metrics (example: extra_metrics)
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} MAP(VARCHAR, DOUBLE)
