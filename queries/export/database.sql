-- title: Export: which database
-- description: When this database was created (its first migration), so an archive written
--   from it is never continued from another database whose row ids start again at 0.
SELECT CAST(applied_at AS VARCHAR) AS created
FROM schema_migrations
WHERE name = '0001_initial'
