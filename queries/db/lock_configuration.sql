-- title: Lock the configuration
-- description: After start-up no SET, RESET or PRAGMA may change any setting, for every cursor.
SET lock_configuration = true
