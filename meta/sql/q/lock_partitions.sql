SELECT p.topic_id, p.partition, p.next_offset, p.log_start_offset, p.lso_pin, p.abort_seq
FROM partitions p
JOIN unnest($1::uuid[], $2::int[]) AS u(topic_id, partition)
  ON p.topic_id = u.topic_id AND p.partition = u.partition
ORDER BY p.topic_id, p.partition
FOR UPDATE OF p
