SELECT t.name, o.partition, o.committed_offset, o.leader_epoch, o.metadata
FROM group_offsets o JOIN topics t ON t.topic_id = o.topic_id
WHERE o.group_id = $1 AND ($2::text[] IS NULL OR t.name = ANY ($2))
ORDER BY t.name, o.partition
