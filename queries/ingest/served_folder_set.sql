-- title: Record the log directory this database serves
-- description: Written when a writer first opens the file, and again when the same folder
--   (same device and inode) is found at another path.
-- param path: the folder's absolute path (example: '/home/me/runs')
-- param device: its st_dev (example: 2049)
-- param inode: its st_ino (example: 1234)
INSERT OR REPLACE INTO served_folder (one, path, device, inode, since)
VALUES (true, $path, $device, $inode, current_localtimestamp())
