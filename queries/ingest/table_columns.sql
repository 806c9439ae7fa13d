-- title: Table columns
-- description: Column names of a table, to know which metric keys already have a column.
-- param table: table name (example: 'metric_rows')
SELECT column_name FROM information_schema.columns WHERE table_name = $table
