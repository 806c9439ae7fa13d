-- title: Allowed directories
-- description: The only folders file-reading functions may touch once external access is off.
-- param dirs: list of folder paths ending in / (example: ['/tmp/'])
SET allowed_directories = $dirs
