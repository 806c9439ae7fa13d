-- title: Checkpoints
-- description: Each checkpoint save (checkpoint_start / checkpoint_end events) with its
--   duration, the time it blocked the training loop, its size, and the gap between logged
--   lines it fell into (a blocking save shows as a stall).
-- param run: run id, or NULL for every run (example: 'seed-cliff')
WITH saves AS (
    SELECT
        run, step,
        min(elapsed_s) FILTER (WHERE kind = 'checkpoint_start') AS started_s,
        max(elapsed_s) FILTER (WHERE kind = 'checkpoint_end') AS ended_s,
        max(TRY_CAST(data->>'duration_s' AS DOUBLE)) FILTER (WHERE kind = 'checkpoint_end')
            AS duration_s,
        max(TRY_CAST(data->>'blocked_s' AS DOUBLE)) FILTER (WHERE kind = 'checkpoint_end')
            AS blocked_s,
        max(TRY_CAST(data->>'bytes' AS BIGINT)) FILTER (WHERE kind = 'checkpoint_end') AS bytes,
        max(data->>'path') AS path
    FROM events
    WHERE kind IN ('checkpoint_start', 'checkpoint_end') AND ($run IS NULL OR run = $run)
    GROUP BY run, step
)
SELECT s.*, g.prev_step AS gap_from_step, g.step AS gap_to_step, g.gap_s,
       g.gap_s / nullif(t.typical_s, 0) AS gap_ratio
FROM saves AS s
LEFT JOIN line_gaps AS g
    ON g.run = s.run AND g.prev_step <= s.step AND s.step < g.step
LEFT JOIN (SELECT run, median(gap_s) AS typical_s FROM line_gaps GROUP BY run) AS t
    ON t.run = s.run
ORDER BY s.run, s.step
