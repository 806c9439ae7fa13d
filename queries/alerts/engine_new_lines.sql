-- title: New lines of runs
-- description: The metric lines of the runs named after the line id each was judged up to,
--   run by run in the order they were logged (every attempt): what line-judged alert rules
--   read, for every run with new lines in one query. The smallest line id bounds the scan
--   (DuckDB skips the older rows), so a pass reads what is new, not the whole table.
-- param runs: run ids (example: ['seed-cliff'])
-- param afters: for each run, the line id judged up to, -1 for none (example: [-1])
-- param min_after: the smallest of afters (example: -1)
-- param max_lines: at most this many lines; a run cut short continues next pass (example: 1000)
WITH judged AS (
    SELECT unnest($runs) AS run, unnest($afters) AS after
)
SELECT m.*
FROM metrics_all AS m
JOIN judged AS j ON j.run = m.run
WHERE m.line_id > $min_after AND m.line_id > j.after
ORDER BY m.run, m.line_id
LIMIT $max_lines
