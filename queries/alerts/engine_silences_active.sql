-- title: Silences in force
-- description: Silences not ended and not yet past their end time.
-- param now: Unix time (example: 0.0)
SELECT id, rule, run, until_time
FROM silences
WHERE ended_time IS NULL AND until_time > $now
ORDER BY id
