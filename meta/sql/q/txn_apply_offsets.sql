-- A committed transaction's offsets become the groups' committed offsets
-- (groups and partitions deleted meanwhile are skipped). The partitions are
-- key-share locked in key order first, as in commit_offsets.sql: a topic's
-- deletion then never waits for an offset row this holds while this waits
-- for a partition the deletion holds.
WITH p AS MATERIALIZED (
    SELECT p.topic_id, p.partition
    FROM partitions p
    WHERE (p.topic_id, p.partition) IN
          (SELECT topic_id, partition FROM txn_offsets WHERE transactional_id = $1)
    ORDER BY p.topic_id, p.partition
    FOR KEY SHARE
)
INSERT INTO group_offsets AS g (group_id, topic_id, partition, committed_offset,
                               leader_epoch, metadata, committed_at)
SELECT o.group_id, o.topic_id, o.partition, o.committed_offset, o.leader_epoch, o.metadata, now()
FROM txn_offsets o
JOIN groups gr ON gr.group_id = o.group_id
JOIN p ON p.topic_id = o.topic_id AND p.partition = o.partition
WHERE o.transactional_id = $1
ON CONFLICT (group_id, topic_id, partition) DO UPDATE
SET committed_offset = EXCLUDED.committed_offset, leader_epoch = EXCLUDED.leader_epoch,
    metadata = EXCLUDED.metadata, committed_at = EXCLUDED.committed_at
