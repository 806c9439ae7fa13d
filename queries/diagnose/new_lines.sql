-- title: New metric lines
-- description: Every run's metric lines with a line id after `after` and up to `upto`, run by
--   run in the order they were logged (every attempt, as written): what live diagnosis judges
--   on a tick, for all runs in one query (diagnose/changes gives `upto`). Line ids are
--   metric_rows' rowids, so DuckDB reads only the row groups that hold the range.
-- param after: the highest line id already judged, -1 for none (example: -1)
-- param upto: the highest line id to read (example: 1000000)
SELECT *
FROM metrics_all
WHERE line_id > $after AND line_id <= $upto
ORDER BY run, line_id
