INSERT INTO open_txns (topic_id, partition, producer_id, first_offset)
SELECT * FROM unnest($1::uuid[], $2::int[], $3::bigint[], $4::bigint[])
