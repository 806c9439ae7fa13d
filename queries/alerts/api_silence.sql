-- title: One silence
-- description: A silence by id, whether or not it is still in force.
-- param id: silences.id (example: 1)
SELECT id, rule, run, created_time, until_time, ended_time, comment
FROM silences
WHERE id = $id
