SELECT topic_id, name, partitions, configs::text FROM topics WHERE topic_id = $1
