UPDATE partitions p
SET next_offset = u.next_offset,
    max_timestamp = greatest(p.max_timestamp, u.max_timestamp),
    size_bytes = p.size_bytes + u.bytes
FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[])
     AS u(topic_id, partition, next_offset, max_timestamp, bytes)
WHERE p.topic_id = u.topic_id AND p.partition = u.partition
