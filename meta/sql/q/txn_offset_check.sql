-- The transaction a TxnOffsetCommit joins, share-locked until it is written,
-- and whether the group is still coordinated under epoch $3.
SELECT t.producer_id, t.producer_epoch, t.state,
       EXISTS (SELECT 1 FROM txn_groups g WHERE g.transactional_id = t.transactional_id
                                            AND g.group_id = $2),
       EXISTS (SELECT 1 FROM groups WHERE group_id = $2 AND coordinator_epoch = $3)
FROM txn_ids t
WHERE t.transactional_id = $1
FOR SHARE OF t
