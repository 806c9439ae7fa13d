-- title: Notification ids
-- description: Fresh notification ids, handed out in the order the notifications were
--   caused (a webhook receives them in id order: a firing before its resolved).
-- param n: how many (example: 2)
SELECT nextval('notification_ids') AS id FROM range($n)
