-- title: Rank step times
-- description: Seconds per step of each rank of a multi-process run (its rank{N}.jsonl
--   files): for each line, the seconds since the same rank's previous line of the attempt
--   divided by the steps between, gathered into about `points` step buckets per rank and
--   attempt, the same buckets for every rank. `seconds_per_step` is the bucket's seconds over
--   its steps, so a rank logging every step and one logging every tenth compare alike;
--   `fastest` and `slowest` are its lines' extremes. A straggler is the rank whose line sits
--   above the others' (diagnosis reports it as a straggler incident).
-- param run: run id (example: 'restarts')
-- param points: about how many buckets per rank and attempt (default: 500) (example: 500)
WITH lines AS (
    SELECT rank, attempt, step,
           -- the gap rule (migration 0028), each rank a stream of its own
           line_gap(line_clock(elapsed_s, "time"), rank, attempt, rowid) AS seconds,
           line_gap(step, rank, attempt, rowid) AS steps
    FROM ranks_all
    WHERE run = $run
), timed AS (
    SELECT * FROM lines WHERE seconds IS NOT NULL AND steps > 0
), span AS (
    SELECT min(step) - 1 AS lo, max(step) AS hi FROM timed
)
SELECT rank, attempt, max(step) AS step, sum(seconds) / sum(steps) AS seconds_per_step,
       min(seconds / steps) AS fastest, max(seconds / steps) AS slowest,
       count(*) AS lines, sum(steps)::BIGINT AS steps
FROM timed, span
GROUP BY rank, attempt,
         floor((step - span.lo - 1) * coalesce($points, 500) / (span.hi - span.lo))
ORDER BY attempt, rank, step
