-- title: Store run.json
-- description: Keeps run.json as written, plus the fields queries use.
-- param run: run id (example: 'example/run')
-- param meta: the document as JSON text (example: '{}')
-- param steps_per_epoch: from run.json, or NULL (example: NULL)
-- param world_size: from run.json, or NULL (example: NULL)
INSERT INTO runs (run, first_seen, last_seen, status, meta, steps_per_epoch, world_size)
VALUES ($run, current_localtimestamp(), current_localtimestamp(), 'running', $meta,
        $steps_per_epoch, $world_size)
ON CONFLICT (run) DO UPDATE SET
    meta = excluded.meta,
    steps_per_epoch = excluded.steps_per_epoch,
    world_size = excluded.world_size
