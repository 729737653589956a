-- A committed transaction's offsets become the groups' committed offsets
-- (groups and partitions deleted meanwhile are skipped).
INSERT INTO group_offsets AS g (group_id, topic_id, partition, committed_offset,
                               leader_epoch, metadata, committed_at)
SELECT o.group_id, o.topic_id, o.partition, o.committed_offset, o.leader_epoch, o.metadata, now()
FROM txn_offsets o
JOIN groups gr ON gr.group_id = o.group_id
JOIN partitions p ON p.topic_id = o.topic_id AND p.partition = o.partition
WHERE o.transactional_id = $1
ON CONFLICT (group_id, topic_id, partition) DO UPDATE
SET committed_offset = EXCLUDED.committed_offset, leader_epoch = EXCLUDED.leader_epoch,
    metadata = EXCLUDED.metadata, committed_at = EXCLUDED.committed_at
