SELECT topic_id, partition, sum(byte_len)::bigint FROM spans WHERE topic_id = ANY($1) GROUP BY topic_id, partition
