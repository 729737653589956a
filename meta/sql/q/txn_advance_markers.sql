-- Each (locked) partition past its marker, with the pin of the open
-- transactions left and the abort count.
UPDATE partitions p
SET next_offset = u.marker_offset + 1,
    max_timestamp = greatest(p.max_timestamp, $6),
    lso_pin = u.pin,
    abort_seq = u.abort_seq
FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[])
     AS u(topic_id, partition, marker_offset, pin, abort_seq)
WHERE p.topic_id = u.topic_id AND p.partition = u.partition
