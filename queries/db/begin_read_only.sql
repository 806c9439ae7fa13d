-- title: Begin a read-only transaction
-- description: Every ad-hoc query runs inside one, so a write hidden in a WITH clause fails.
BEGIN TRANSACTION READ ONLY
