-- title: How far live diagnosis judged
-- description: The metric line id, event rowid and rank line rowid live diagnosis judged
--   through, every run's, when they were judged by this version of its code and watch
--   settings (no row otherwise: judge every run from the start). Migration 0029.
-- param version: app/diagnose/marks.py's version of the code and settings (example: 'x')
SELECT last_line, last_event, last_rank_line
FROM diagnosis_marks
WHERE version = $version
