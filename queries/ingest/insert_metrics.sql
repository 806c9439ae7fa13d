-- title: Insert metrics
-- description: Appends a parsed batch (an Arrow table registered as chunk) to metrics_all, matching columns by name.
-- chunk: metrics_all
INSERT INTO metrics_all BY NAME SELECT * FROM chunk
