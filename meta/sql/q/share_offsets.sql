SELECT topic_id, partition, state_epoch, start_offset FROM share_partitions
WHERE group_id = $1
ORDER BY topic_id, partition
