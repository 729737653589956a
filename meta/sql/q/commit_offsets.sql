-- Commits offsets under the coordinator epoch (the group row is share-locked,
-- so a takeover waits for this commit or fences it). Partitions that do not
-- exist are skipped; the (topic, partition) pairs written come back.
-- The partitions are key-share locked in key order before any offset row is
-- touched: a topic's deletion locks them (in that order) before its cascade
-- deletes the offset rows, so the commit waits for it first instead of
-- holding a row the cascade needs while its foreign-key check waits for a
-- partition the deletion holds (a deadlock).
WITH g AS MATERIALIZED (
    SELECT 1 FROM groups WHERE group_id = $1 AND coordinator_epoch = $2 FOR SHARE
), u AS (
    SELECT * FROM unnest($3::uuid[], $4::int[], $5::bigint[], $6::int[], $7::bytea[])
        AS u(topic_id, partition, committed_offset, leader_epoch, metadata)
), p AS MATERIALIZED (
    SELECT p.topic_id, p.partition
    FROM partitions p
    WHERE EXISTS (SELECT 1 FROM g)
      AND (p.topic_id, p.partition) IN (SELECT topic_id, partition FROM u)
    ORDER BY p.topic_id, p.partition
    FOR KEY SHARE
)
INSERT INTO group_offsets AS o (group_id, topic_id, partition, committed_offset,
                               leader_epoch, metadata, committed_at)
SELECT $1, u.topic_id, u.partition, u.committed_offset, u.leader_epoch, u.metadata, now()
FROM u JOIN p ON p.topic_id = u.topic_id AND p.partition = u.partition
ON CONFLICT (group_id, topic_id, partition) DO UPDATE
SET committed_offset = EXCLUDED.committed_offset, leader_epoch = EXCLUDED.leader_epoch,
    metadata = EXCLUDED.metadata, committed_at = EXCLUDED.committed_at
RETURNING o.topic_id, o.partition
