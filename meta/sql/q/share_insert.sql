INSERT INTO share_partitions (group_id, topic_id, partition, version, state_epoch, start_offset, state)
SELECT $1, $2, $3, 1, $4, $5, $6
WHERE EXISTS (SELECT 1 FROM groups WHERE group_id = $1 AND group_type = 'share')
ON CONFLICT DO NOTHING
