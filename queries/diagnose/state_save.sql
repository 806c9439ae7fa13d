-- title: Store runs' diagnosis state
-- description: Each run's detector state (app/diagnose/marks.py), as of the marks stored in the
--   same transaction (diagnose/marks_save).
-- chunk: diagnosis_state
INSERT INTO diagnosis_state BY NAME SELECT * FROM chunk
ON CONFLICT (run) DO UPDATE SET state = excluded.state
