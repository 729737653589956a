SELECT next_offset, log_start_offset, max_timestamp
FROM partitions
WHERE topic_id = $1 AND partition = $2
