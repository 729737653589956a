-- The window commit's partition locks. NO KEY UPDATE: exclusive among
-- commits (and against deletion), yet not against the key-share lock a
-- foreign key check takes, so a compaction pass inserting spans of the
-- partition neither waits for commits nor holds them up.
SELECT p.topic_id, p.partition, p.next_offset, p.log_start_offset, p.lso_pin, p.abort_seq
FROM partitions p
JOIN unnest($1::uuid[], $2::int[]) AS u(topic_id, partition)
  ON p.topic_id = u.topic_id AND p.partition = u.partition
ORDER BY p.topic_id, p.partition
FOR NO KEY UPDATE OF p
