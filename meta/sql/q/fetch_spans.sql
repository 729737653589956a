SELECT base_offset, last_offset, object_key, byte_start, byte_len, batch_count, max_timestamp
FROM spans
WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3
ORDER BY base_offset
LIMIT $4
