-- title: Insert attempts
-- description: Appends a parsed batch (an Arrow table registered as chunk) to attempts, matching columns by name.
-- chunk: attempts
INSERT INTO attempts BY NAME SELECT * FROM chunk
