-- title: Runs to diagnose
-- description: The runs live diagnosis judges on a tick, in one round trip: those with new
--   lines and those with events stored after rowid `after` (up to `upto`), each with its steps
--   per epoch (run.json), in order, each followed by those events (event_id and step; a run's
--   own row has event_id NULL). An event can be ingested after the lines it explains
--   (events.jsonl and metrics.jsonl are read apart), so live diagnosis judges again the
--   incidents whose window holds one. Runs are found by their key, not by reading them all.
-- param runs: runs with new lines (example: ['seed-cliff'])
-- param after: the highest event rowid already judged, -1 for none (example: -1)
-- param upto: the highest event rowid to read (example: 1000000)
WITH new_events AS (
    SELECT run, rowid AS event_id, step
    FROM events
    WHERE rowid > $after AND rowid <= $upto
)
SELECT run, steps_per_epoch, NULL::BIGINT AS event_id, NULL::BIGINT AS step
FROM runs
WHERE run IN (SELECT unnest($runs) UNION SELECT run FROM new_events)
UNION ALL
SELECT run, NULL, event_id, step
FROM new_events
ORDER BY run, event_id NULLS FIRST
