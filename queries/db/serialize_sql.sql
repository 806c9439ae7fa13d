-- title: Parse tree of a read
-- description: DuckDB's parse tree of an ad-hoc read as JSON, so every function it calls can be
--   checked before it runs (app/db/functions.py); parsing executes nothing.
-- param sql: the read, as text (example: 'SELECT 1')
SELECT json_serialize_sql($sql)
