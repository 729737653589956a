INSERT INTO txn_partitions (transactional_id, topic_id, partition)
SELECT $1, u.topic_id, u.partition FROM unnest($2::uuid[], $3::int[]) AS u(topic_id, partition)
ON CONFLICT DO NOTHING
