-- title: Applied migrations
-- description: Names of the migrations already applied.
SELECT name FROM schema_migrations ORDER BY name
