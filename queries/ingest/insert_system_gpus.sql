-- title: Insert system GPU samples
-- description: Appends the per-GPU values of system.jsonl's samples (an Arrow table
--   registered as chunk, with its run) to system_gpus, matching columns by name.
-- chunk: system_gpus
INSERT INTO system_gpus BY NAME SELECT * FROM chunk
