-- title: Memory limit
-- description: Caps DuckDB's buffer memory in this process.
-- param limit: a size such as 256MB (example: '256MB')
SET memory_limit = $limit
