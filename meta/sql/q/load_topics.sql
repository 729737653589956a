SELECT topic_id, name, partitions, configs::text FROM topics ORDER BY name
