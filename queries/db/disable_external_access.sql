-- title: Disable external access
-- description: No file or network access outside the allowed directories, for every cursor.
SET enable_external_access = false
