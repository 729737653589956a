UPDATE topics SET partitions = $2 WHERE topic_id = $1
