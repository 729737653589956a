-- The window commit's partition locks. NO KEY UPDATE: exclusive among
-- commits and against deletion (a topic's deletion waits for the commit, so
-- the spans trigger of schema 14 sees its spans), yet not against the key-share
-- locks foreign-key checks of the partition's other rows take (producer
-- state, transactions). A compaction swap takes none of them: it neither
-- waits for commits nor holds them up.
SELECT p.topic_id, p.partition, p.next_offset, p.log_start_offset, p.lso_pin, p.abort_seq
FROM partitions p
JOIN unnest($1::uuid[], $2::int[]) AS u(topic_id, partition)
  ON p.topic_id = u.topic_id AND p.partition = u.partition
ORDER BY p.topic_id, p.partition
FOR NO KEY UPDATE OF p
