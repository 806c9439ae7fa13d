-- title: Active silences
-- description: Silences in force now: not ended by `alerts unsilence` and not yet run out.
-- param now: Unix seconds (example: 0.0)
SELECT id, rule, run, created_time, until_time, comment
FROM silences
WHERE ended_time IS NULL AND until_time > $now
ORDER BY id
