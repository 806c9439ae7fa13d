-- title: Probe
-- description: The cheapest statement: it fails with a FatalException once DuckDB has
--   invalidated the database, which is how the keeper notices without waiting for a worker.
SELECT 1
