-- title: Grow a stored incident
-- description: What live diagnosis writes when an incident it stored before grows with the
--   same causes (an open cliff, on every tick): its end and worst value. Leaving the causes
--   and evidence lists alone makes the write cheaper still than diagnose/incident_update.
--   It answers the rows changed (0: store it anew).
-- param run: run id (example: 'seed-cliff')
-- param kind: stall, spike, cliff or nonfinite (example: 'cliff')
-- param metric: the metric, gap_s for a stall (example: 'accuracy')
-- param step: the incident's first step (example: 4231)
-- param end_step: its last step so far (example: 4400)
-- param worst_step: the step of its worst value (example: 4302)
-- param value: its worst value (example: 0.004)
UPDATE incidents
SET end_step = $end_step,
    worst_step = $worst_step,
    value = $value,
    updated_at = current_localtimestamp()
WHERE run = $run AND kind = $kind AND metric = $metric AND step = $step
