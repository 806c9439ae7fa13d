-- title: Runs with new lines for the alert rules
-- description: Runs the rules have not met yet, or whose last_seen changed since they were last
--   judged (ingest moves it in the transaction that stores a run's lines or events; compared
--   for change, not order, so a local clock set back an hour loses nothing), with what the
--   rules need to judge them (last_write: when the monitor last saw a log grow, files.grew_at
--   by its own clock). One query per pass, however many runs there are.
SELECT r.run, r.last_seen, p.last_line, p.first_time, p.history_step,
       -- not system.jsonl: its sampler writes on through a stall
       (SELECT max(f.grew_at) FROM files AS f
        WHERE f.run = r.run AND f.kind NOT IN ('run_meta', 'system')) AS last_write
FROM runs AS r
LEFT JOIN alert_progress AS p USING (run)
WHERE p.run IS NULL OR r.last_seen IS DISTINCT FROM p.seen
ORDER BY r.run
