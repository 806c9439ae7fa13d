-- title: Add a silence
-- description: Mutes notifications of rules matching `rule` on runs matching `run` until
--   `until_time`; state changes still happen and are kept.
-- param rule: glob on rule names (example: 'stall*')
-- param run: glob on run names (example: '*')
-- param created_time: Unix seconds now (example: 0.0)
-- param until_time: Unix seconds it ends (example: 7200.0)
-- param comment: why, or NULL (example: NULL)
INSERT INTO silences (rule, run, created_time, until_time, comment)
VALUES ($rule, $run, $created_time, $until_time, $comment)
RETURNING id, rule, run, created_time, until_time, comment
