-- Pending offsets of transactional id $1 for group $2, written only while
-- the transaction is open under producer $3/$4 with the group added, and the
-- group is coordinated under epoch $10 (its row share-locked: a takeover
-- waits for this write or fences it, as for OffsetCommit).
INSERT INTO txn_offsets AS o (transactional_id, group_id, topic_id, partition,
                             committed_offset, leader_epoch, metadata)
SELECT $1, $2, u.topic_id, u.partition, u.committed_offset, u.leader_epoch, u.metadata
FROM (SELECT 1 FROM txn_ids t
      WHERE t.transactional_id = $1 AND t.producer_id = $3 AND t.producer_epoch = $4
        AND t.state = 'Ongoing'
        AND EXISTS (SELECT 1 FROM txn_groups g WHERE g.transactional_id = $1
                                                 AND g.group_id = $2)) AS ok,
     (SELECT 1 FROM groups WHERE group_id = $2 AND coordinator_epoch = $10 FOR SHARE) AS grp,
     unnest($5::uuid[], $6::int[], $7::bigint[], $8::int[], $9::bytea[])
         AS u(topic_id, partition, committed_offset, leader_epoch, metadata)
     JOIN partitions p ON p.topic_id = u.topic_id AND p.partition = u.partition
ON CONFLICT (transactional_id, group_id, topic_id, partition) DO UPDATE
SET committed_offset = EXCLUDED.committed_offset, leader_epoch = EXCLUDED.leader_epoch,
    metadata = EXCLUDED.metadata
RETURNING o.topic_id, o.partition
