-- title: Record a migration
-- description: Marks a migration as applied, in the same transaction as its statements.
-- param name: migration name (example: '9999_example')
INSERT INTO schema_migrations (name) VALUES ($name)
