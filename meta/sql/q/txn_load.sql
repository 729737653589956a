SELECT t.producer_id, t.producer_epoch, t.last_producer_id, t.last_producer_epoch,
       t.timeout_ms, t.state, t.start_ms, t.updated_ms,
       coalesce(ARRAY(SELECT tp.topic_id FROM txn_partitions tp
                      WHERE tp.transactional_id = t.transactional_id
                      ORDER BY tp.topic_id, tp.partition), '{}'),
       coalesce(ARRAY(SELECT tp.partition FROM txn_partitions tp
                      WHERE tp.transactional_id = t.transactional_id
                      ORDER BY tp.topic_id, tp.partition), '{}'),
       coalesce(ARRAY(SELECT g.group_id FROM txn_groups g
                      WHERE g.transactional_id = t.transactional_id
                      ORDER BY g.group_id), '{}'),
       t.transactional_id
FROM txn_ids t
WHERE t.transactional_id = ANY ($1::bytea[])
FOR UPDATE OF t
