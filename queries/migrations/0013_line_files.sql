-- title: Files that carry a run's training lines
-- description: Every file whose rows land in metric_rows, whatever format wrote it: our own
--   metrics.jsonl (kind `metrics`) and the logs of other trainers (`jsonl`, `hf_state`,
--   `llmc`, `tfevents`, and any format added later), but not events.jsonl, rank{N}.jsonl or
--   run.json. The rule is stated here once: the dashboard's reads, the chart tiles, /metrics
--   and the alert rules take a run's lines from these files (issue 19: they took kind
--   `metrics` only, so a Hugging Face or llm.c run showed no lines). A view is bound again at
--   each query, so columns added to files later appear in it.

CREATE VIEW line_files AS
SELECT * FROM files WHERE kind NOT IN ('events', 'rank', 'run_meta');
