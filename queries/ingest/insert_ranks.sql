-- title: Insert ranks
-- description: Appends a parsed batch (an Arrow table registered as chunk) to ranks_all, matching columns by name.
-- chunk: ranks_all
INSERT INTO ranks_all BY NAME SELECT * FROM chunk
