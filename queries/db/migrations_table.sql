-- title: Migrations table
-- description: Records which named migrations (queries/migrations/*.sql) were applied.
CREATE TABLE IF NOT EXISTS schema_migrations (
    name VARCHAR PRIMARY KEY,
    applied_at TIMESTAMP DEFAULT current_localtimestamp()
)
