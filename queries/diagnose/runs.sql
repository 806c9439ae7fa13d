-- title: Runs to diagnose
-- description: What live diagnosis asks of the database once per tick, besides each run's new
--   lines, in one round trip: every run with its steps per epoch (run.json), in order, each
--   followed by its events stored after rowid `after` (event_id and step; a run's own row has
--   event_id NULL). An event can be ingested after the lines it explains (events.jsonl and
--   metrics.jsonl are read apart), so live diagnosis judges again the incidents whose window
--   holds one.
-- param after: the highest event rowid already seen, -1 for none (example: -1)
SELECT run, steps_per_epoch, NULL::BIGINT AS event_id, NULL::BIGINT AS step
FROM runs
UNION ALL
SELECT run, NULL, rowid, step
FROM events
WHERE rowid > $after
ORDER BY run, event_id NULLS FIRST
