WITH a AS (DELETE FROM txn_offsets WHERE transactional_id = $1),
     b AS (DELETE FROM txn_groups WHERE transactional_id = $1)
DELETE FROM txn_partitions WHERE transactional_id = $1
