SELECT k.topic_id, k.partition, p.next_offset, p.log_start_offset,
       s.version, s.state_epoch, s.start_offset, s.state,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM unnest($2::uuid[], $3::integer[]) AS k (topic_id, partition)
LEFT JOIN partitions p ON p.topic_id = k.topic_id AND p.partition = k.partition
LEFT JOIN share_partitions s
       ON s.group_id = $1 AND s.topic_id = k.topic_id AND s.partition = k.partition
