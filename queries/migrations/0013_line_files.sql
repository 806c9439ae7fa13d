-- title: Files that carry a run's training lines, and how a run from another trainer ends
-- description: `line_files`: every file whose rows land in metric_rows, whatever format wrote
--   it: our own metrics.jsonl (kind `metrics`) and other trainers' logs (`jsonl`, `hf_state`,
--   `llmc`, `tfevents`, and any format added later), but not events.jsonl, rank{N}.jsonl or
--   run.json. The dashboard's reads, the chart tiles, /metrics and the alert rules take a
--   run's lines from these files (issue 19: they took kind `metrics` only, so a Hugging Face
--   or llm.c run showed no lines). `run_status`: every run's status as its logs say it. Our
--   own logs say it with run_end (runs.status). Logs of other trainers write no run_end
--   (`other_trainer`: none of the run's files is one of ours); theirs is `completed` once the
--   log marks the end of training (`log_ended`): a summary row at or after the last step
--   (Hugging Face's end-of-training entry with train_runtime, LLaMA-Factory's closing line at
--   total_steps), else `running`. Views are bound again at each query, so columns added to
--   files later appear in them.

CREATE VIEW line_files AS
SELECT * FROM files WHERE kind NOT IN ('events', 'rank', 'run_meta');

CREATE VIEW run_status AS
WITH own AS (
    SELECT DISTINCT run FROM files WHERE kind IN ('metrics', 'events', 'rank', 'run_meta')
), lines AS (
    SELECT run, max(last_step) AS last_step FROM line_files GROUP BY run
), ends AS (
    SELECT f.run, max(e.step) AS end_step
    FROM eval_rows AS e
    JOIN files AS f USING (file_id)
    WHERE e.kind = 'summary'
    GROUP BY f.run
)
SELECT r.run, o.run IS NULL AS other_trainer,
       o.run IS NULL AND coalesce(e.end_step >= l.last_step, false) AS log_ended,
       CASE WHEN o.run IS NULL AND coalesce(e.end_step >= l.last_step, false)
                 AND coalesce(r.status, 'running') = 'running' THEN 'completed'
            ELSE coalesce(r.status, 'running') END AS status
FROM runs AS r
LEFT JOIN own AS o USING (run)
LEFT JOIN lines AS l USING (run)
LEFT JOIN ends AS e USING (run);
