-- title: Add a metric column
-- description: A key seen for the first time becomes a DOUBLE column (identifiers are quoted).
-- identifier table: metrics_all or ranks_all (example: metrics_all)
-- identifier column: the metric key (example: example_metric)
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} DOUBLE
