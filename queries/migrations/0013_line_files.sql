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
WITH logs AS (  -- one pass over files: whether one is ours, and the training line's last step
    SELECT f.run, bool_or(f.kind IN ('metrics', 'events', 'rank', 'run_meta')) AS own,
           max(l.last_step) AS last_step
    FROM files AS f
    LEFT JOIN line_files AS l USING (file_id)
    GROUP BY f.run
), ends AS (
    SELECT f.run, max(e.step) AS end_step
    FROM eval_rows AS e
    JOIN files AS f USING (file_id)
    WHERE e.kind = 'summary'
    GROUP BY f.run
), judged AS (
    SELECT r.run, r.status, NOT coalesce(g.own, false) AS other_trainer,
           NOT coalesce(g.own, false) AND coalesce(e.end_step >= g.last_step, false)
               AS log_ended
    FROM runs AS r
    LEFT JOIN logs AS g USING (run)
    LEFT JOIN ends AS e USING (run)
)
SELECT run, other_trainer, log_ended,
       CASE WHEN log_ended AND coalesce(status, 'running') = 'running' THEN 'completed'
            ELSE coalesce(status, 'running') END AS status
FROM judged;
