-- title: Run metadata
-- description: What run.json said about a run (steps per epoch, world size, the whole file).
-- param run: run id (example: 'seed-cliff')
SELECT run, status, steps_per_epoch, world_size, meta
FROM runs
WHERE run = $run
