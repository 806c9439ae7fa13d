-- title: Table columns
-- description: Column names of a table, to know which metric keys already have a column.
--   pragma_table_info looks at this one table: information_schema.columns and duckdb_columns()
--   list every schema's, and building the system views took ~15 ms on a fresh database.
-- param table: table name (example: 'metric_rows')
SELECT name AS column_name FROM pragma_table_info($table)
