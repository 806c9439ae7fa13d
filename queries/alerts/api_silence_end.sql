-- title: End a silence
-- description: `alerts unsilence ID`: ends a silence now, if it is still in force.
-- param id: silences.id (example: 1)
-- param now: Unix seconds (example: 0.0)
UPDATE silences SET ended_time = $now
WHERE id = $id AND ended_time IS NULL AND until_time > $now
RETURNING id, rule, run, created_time, until_time, ended_time
