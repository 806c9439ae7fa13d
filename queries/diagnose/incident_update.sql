-- title: Update a stored incident
-- description: What live diagnosis writes when an incident it stored before grows or is judged
--   again: the same columns as ingest/incident_upsert's DO UPDATE (the baseline stays as first
--   stored). A plain UPDATE of one row costs a fraction of an upsert through a registered
--   table, which is most of a live tick; it answers the rows changed (0: store it anew).
-- param run: run id (example: 'seed-cliff')
-- param kind: stall, spike, cliff or nonfinite (example: 'spike')
-- param metric: the metric, gap_s for a stall (example: 'loss')
-- param step: the incident's first step (example: 2027)
-- param end_step: its last step so far (example: 2035)
-- param worst_step: the step of its worst value (example: 2029)
-- param value: its worst value (example: 13.0)
-- param causes: likely causes, most likely first (example: ['checkpoint'])
-- param evidence: one sentence per cause (example: ['checkpoint at step 2000 blocked the loop'])
UPDATE incidents
SET end_step = $end_step,
    worst_step = $worst_step,
    value = $value,
    causes = $causes,
    evidence = $evidence,
    updated_at = current_localtimestamp()
WHERE run = $run AND kind = $kind AND metric = $metric AND step = $step
