-- title: Store an incident
-- description: Inserts an incident found by live detection, or updates its end, worst value
--   and causes.
-- chunk: incidents
INSERT INTO incidents BY NAME SELECT * FROM chunk
ON CONFLICT (run, kind, metric, step) DO UPDATE SET
    end_step = excluded.end_step,
    worst_step = excluded.worst_step,
    value = excluded.value,
    causes = excluded.causes,
    evidence = excluded.evidence,
    updated_at = current_localtimestamp()
