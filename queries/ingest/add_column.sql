-- title: Add a metric column
-- description: A key seen for the first time becomes a DOUBLE column (identifiers are quoted).
-- identifier table: metric_rows or ranks_all (example: metric_rows)
-- identifier column: the metric key (example: example_metric)
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} DOUBLE
