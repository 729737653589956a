INSERT INTO spans (topic_id, partition, base_offset, last_offset, object_key,
                   byte_start, byte_len, batch_count, max_timestamp)
SELECT * FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::bigint[], $5::text[],
                     $6::bigint[], $7::int[], $8::int[], $9::bigint[])
