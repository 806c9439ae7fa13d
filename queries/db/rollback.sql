-- title: Roll back
-- description: Ends the read-only transaction of an ad-hoc query.
ROLLBACK
