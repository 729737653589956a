DELETE FROM share_partitions s
USING unnest($2::uuid[], $3::integer[]) AS k (topic_id, partition)
WHERE s.group_id = $1 AND s.topic_id = k.topic_id AND s.partition = k.partition
