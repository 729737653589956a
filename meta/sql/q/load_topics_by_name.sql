SELECT topic_id, name, partitions, configs::text FROM topics WHERE name = ANY($1::text[])
