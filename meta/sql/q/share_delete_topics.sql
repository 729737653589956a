DELETE FROM share_partitions WHERE group_id = $1 AND topic_id = ANY($2)
