SELECT next_offset, log_start_offset, max_timestamp, least(coalesce(lso_pin, next_offset), next_offset)
FROM partitions
WHERE topic_id = $1 AND partition = $2
