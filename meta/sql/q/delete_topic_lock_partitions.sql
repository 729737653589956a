-- A topic's deletion locks its partitions in key order first, as window
-- commits, EndTxn and log-start moves do, so its cascade never takes them in
-- another order against one of those.
SELECT partition FROM partitions
WHERE topic_id = $1
ORDER BY partition
FOR UPDATE
