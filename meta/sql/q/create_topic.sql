INSERT INTO topics (topic_id, name, partitions, configs)
VALUES ($1, $2, $3, $4::text::jsonb)
ON CONFLICT (name) DO NOTHING
