-- title: Run ids
-- description: Every run id, in order.
SELECT run FROM runs ORDER BY run
