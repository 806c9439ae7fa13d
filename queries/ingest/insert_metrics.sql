-- title: Insert metrics
-- description: Appends a parsed batch (an Arrow table registered as chunk) to metric_rows, matching columns by name.
-- chunk: metric_rows
INSERT INTO metric_rows BY NAME SELECT * FROM chunk
