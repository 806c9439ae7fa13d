-- title: Where a checkpoint save cliffwatch infers goes in its run
-- description: For a checkpoint folder or file found in or beside a run folder (app/ingest/
--   saves.py): `logs`, how many of the run's logs are tracked (a save with none, such as a
--   folder of downloaded weights, makes no run and waits); and, for a file with no step in
--   its name (model.pt), `before`, the last step the run logged at or before the file's
--   modification time, `latest`, the time of the run's newest line (the save is placed once
--   the log has been read past it; NULL: no line has a time), and `lines`, the run's lines.
-- param run: the run the save belongs to (example: 'example/run')
-- param mtime: the save's modification time, Unix seconds (example: 1764633791.2)
SELECT (SELECT count(*) FROM line_files WHERE run = $run AND (state <> 'skipped' OR lines > 0))
           AS logs,
       max(step) FILTER (WHERE "time" <= $mtime) AS before, max("time") AS latest,
       count(*) AS lines
FROM metrics_all
WHERE run = $run
