-- The spans a pass wrote, all sparse, of partition ($1, $2).
INSERT INTO spans (topic_id, partition, base_offset, last_offset, object_key,
                   byte_start, byte_len, batch_count, max_timestamp, sparse)
SELECT $1, $2, u.*, true
FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::int[], $8::int[],
            $9::bigint[]) AS u
