-- title: Run events after a rowid
-- description: One run's events stored after rowid `after`, with their step: an event can be
--   ingested after the lines it explains (events.jsonl and metrics.jsonl are read apart), so
--   live diagnosis judges again the incidents whose window holds one.
-- param run: run id (example: 'seed-cliff')
-- param after: the last rowid already seen, -1 for none (example: -1)
SELECT rowid, step
FROM events
WHERE run = $run AND rowid > $after
ORDER BY rowid
