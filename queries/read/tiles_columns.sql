-- title: Chart tile columns
-- description: No rows, only metric_rows' columns and their types: the numeric ones, but for
--   the monitor's own and the x axes, are what charts and tiles cover (app/read/tiles.py).
--   Cheaper than information_schema (about 1 ms against 90 ms cold).
SELECT * FROM metric_rows LIMIT 0
