INSERT INTO objects (object_key, size_bytes, agent_id)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[])
