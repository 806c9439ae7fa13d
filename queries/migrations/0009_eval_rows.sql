-- title: Rows kept apart from the training line
-- description: Validation and evaluation metrics (a log's `eval_loss`, llm.c's `tel:`) and
--   summary rows (Hugging Face's end-of-training entry, a per-epoch `train_loss, val_loss`
--   row) of logs other trainers wrote. They are rows of the run like the training lines, but
--   stored here, so a validation pass every 250 steps neither starts an attempt (its step
--   repeats a training step) nor breaks the time-gap and spike analysis of the training line.
--   Metric columns are added as keys appear, as for metric_rows. `attempt` is the attempt of
--   the training line the row was logged during.

CREATE TABLE eval_rows (
    attempt INTEGER NOT NULL,
    step BIGINT NOT NULL,
    kind VARCHAR NOT NULL,            -- eval | summary
    elapsed_s DOUBLE,
    "time" DOUBLE,
    epoch DOUBLE,
    file_id INTEGER NOT NULL,
    ingested_at TIMESTAMP DEFAULT current_localtimestamp()
);

-- Every eval and summary row with its run and line_id (its position in ingest order).
CREATE VIEW evals AS
SELECT f.run, e.*
FROM (SELECT rowid AS line_id, * FROM eval_rows) AS e
JOIN files AS f USING (file_id);
