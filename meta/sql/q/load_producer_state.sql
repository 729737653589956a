SELECT s.producer_id, s.topic_id, s.partition, s.producer_epoch, s.history
FROM producer_state s
JOIN unnest($1::bigint[], $2::uuid[], $3::int[]) AS u(producer_id, topic_id, partition)
  ON s.producer_id = u.producer_id AND s.topic_id = u.topic_id AND s.partition = u.partition
