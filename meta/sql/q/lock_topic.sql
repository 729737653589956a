SELECT topic_id, partitions FROM topics WHERE name = $1 FOR UPDATE
