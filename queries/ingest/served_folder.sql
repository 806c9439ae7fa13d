-- title: The log directory this database serves
-- description: The folder a writer first opened this database for (app/db/served.py); no row
--   in a database made before it was recorded.
SELECT path, device, inode FROM served_folder
