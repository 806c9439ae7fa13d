-- title: Insert errors
-- description: Appends a parsed batch (an Arrow table registered as chunk) to ingest_errors, matching columns by name.
-- chunk: ingest_errors
INSERT INTO ingest_errors BY NAME SELECT * FROM chunk
