-- title: Runs' typical intervals
-- description: For each run named, the median seconds between its last 64 logged lines
--   (elapsed_s, else time) within an attempt: the base of a stall rule's adaptive budget.
--   One scan for every run that needs it.
-- param runs: run ids (example: ['seed-cliff'])
WITH recent AS (
    SELECT run, attempt, line_id, line_clock(elapsed_s, "time") AS t,
           row_number() OVER (PARTITION BY run ORDER BY line_id DESC) AS back
    FROM metrics_all
    WHERE list_contains($runs, run)
), gaps AS (
    SELECT run, line_gap(t, run, attempt, line_id) AS gap_s  -- the gap rule, migration 0028
    FROM recent
    WHERE back <= 65
)
SELECT run, median(gap_s) AS typical_s
FROM gaps
WHERE gap_s >= 0
GROUP BY run
