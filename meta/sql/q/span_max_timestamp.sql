SELECT s.base_offset, s.last_offset, s.object_key, s.byte_start, s.byte_len, s.batch_count,
       s.max_timestamp, coalesce(o.size_bytes, 0), s.sparse
FROM spans s LEFT JOIN objects o ON o.object_key = s.object_key
WHERE s.topic_id = $1 AND s.partition = $2
  AND s.last_offset >= (SELECT log_start_offset FROM partitions
                        WHERE topic_id = $1 AND partition = $2)
ORDER BY s.max_timestamp DESC, s.base_offset ASC
LIMIT 1
