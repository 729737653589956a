-- $6: the first offset of a transaction opened in the partition by this
-- commit, or null; the last stable offset stays at or below it.
UPDATE partitions p
SET next_offset = u.next_offset,
    max_timestamp = greatest(p.max_timestamp, u.max_timestamp),
    size_bytes = p.size_bytes + u.bytes,
    lso_pin = least(p.lso_pin, u.pin)
FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
     AS u(topic_id, partition, next_offset, max_timestamp, bytes, pin)
WHERE p.topic_id = u.topic_id AND p.partition = u.partition
