-- title: Insert events
-- description: Appends a parsed batch (an Arrow table registered as chunk) to events, matching columns by name.
-- chunk: events
INSERT INTO events BY NAME SELECT * FROM chunk
