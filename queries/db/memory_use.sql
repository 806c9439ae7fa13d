-- title: Memory that cannot be spilled
-- description: Bytes DuckDB holds now, all connections together, that it cannot spill to disk
--   (tag ALLOCATOR: aggregate states such as list() or string_agg(); sorts, hash tables and
--   buffered results are spilled when the writes need room), and the limit all memory counts
--   against, as DuckDB prints it (e.g. '244.1 MiB'). The ad-hoc query guard stops a query once
--   their ratio passes its share.
SELECT coalesce(sum(memory_usage_bytes) FILTER (WHERE tag = 'ALLOCATOR'), 0) AS held,
       current_setting('memory_limit') AS limit
FROM duckdb_memory()
