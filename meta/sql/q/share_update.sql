UPDATE share_partitions
SET version = version + 1, state_epoch = $5, start_offset = $6, state = $7, updated_at = now()
WHERE group_id = $1 AND topic_id = $2 AND partition = $3 AND version = $4
