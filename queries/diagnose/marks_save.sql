-- title: Store how far live diagnosis judged
-- description: The one diagnosis_marks row, written in the same transaction as the runs'
--   states (diagnose/state_save), so a restart resumes where both agree.
-- param version: app/diagnose/marks.py's version of the code and settings (example: 'x')
-- param line: metric line id judged through, -1 for none (example: -1)
-- param event: event rowid judged through, -1 for none (example: -1)
-- param rank: rank line rowid judged through, -1 for none (example: -1)
INSERT OR REPLACE INTO diagnosis_marks
VALUES (true, $version, $line, $event, $rank, current_localtimestamp())
