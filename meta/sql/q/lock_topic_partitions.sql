-- Locks partitions of one topic in key order (the order window commits lock
-- them in, so the two never deadlock): log-start moves, and a topic's
-- deletion, all of its partitions, before its cascade.
SELECT partition, next_offset, log_start_offset
FROM partitions
WHERE topic_id = $1 AND partition = ANY($2::int[])
ORDER BY partition
FOR UPDATE
