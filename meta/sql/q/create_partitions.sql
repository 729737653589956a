INSERT INTO partitions (topic_id, partition)
SELECT $1, generate_series($2::int, $3::int - 1)
