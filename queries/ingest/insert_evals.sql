-- title: Insert eval and summary rows
-- description: Appends rows kept apart from the training line (validation metrics, summaries
--   of other trainers' logs; an Arrow table registered as chunk) to eval_rows, by name.
-- chunk: eval_rows
INSERT INTO eval_rows BY NAME SELECT * FROM chunk
