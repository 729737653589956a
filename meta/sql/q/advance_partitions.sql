UPDATE partitions p
SET next_offset = u.next_offset,
    max_timestamp = greatest(p.max_timestamp, u.max_timestamp)
FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::bigint[])
     AS u(topic_id, partition, next_offset, max_timestamp)
WHERE p.topic_id = u.topic_id AND p.partition = u.partition
