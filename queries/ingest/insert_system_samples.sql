-- title: Insert system samples
-- description: Appends system.jsonl's samples (an Arrow table registered as chunk, with its
--   run) to system_samples, matching columns by name.
-- chunk: system_samples
INSERT INTO system_samples BY NAME SELECT * FROM chunk
