-- title: Checkpoint saves are files of their own kind, and carry no training lines
-- description: A checkpoint folder or weights file cliffwatch infers a save from (app/ingest/
--   saves.py: out/checkpoint-500/, checkpoints/epoch=3-step=1200.ckpt) is a `files` row of
--   kind `save`: its one inferred checkpoint_end event is stored with its file_id at offset 0,
--   and its offset is 1 once stored, so it is stored exactly once. Such a row holds no rows
--   of metric_rows: `line_files` leaves it out, as it does events.jsonl.

CREATE OR REPLACE VIEW line_files AS
SELECT * FROM files WHERE kind NOT IN ('events', 'rank', 'run_meta', 'save');
