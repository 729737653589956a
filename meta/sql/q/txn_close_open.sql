DELETE FROM open_txns o
USING unnest($2::uuid[], $3::int[]) AS u(topic_id, partition)
WHERE o.producer_id = $1 AND o.topic_id = u.topic_id AND o.partition = u.partition
