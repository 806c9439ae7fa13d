-- title: The step a save with none in its name comes after
-- description: For a checkpoint file with no step in its name (model.pt), the last step the
--   run logged at or before the file's modification time (`before`), and the time of the
--   run's newest line (`latest`): the save is placed only once `latest` is at or after its
--   time (the log has been read past the save). NULL `latest`: no line with a time yet.
-- param run: the run the save belongs to (example: 'example/run')
-- param mtime: the save's modification time, Unix seconds (example: 1764633791.2)
SELECT max(step) FILTER (WHERE "time" <= $mtime) AS before, max("time") AS latest
FROM metrics_all
WHERE run = $run
