-- The first retained span at or after offset $4 holding a timestamp >= $3
-- (spans wholly below the log start wait for the collector and are never
-- answered).
SELECT s.base_offset, s.last_offset, s.object_key, s.byte_start, s.byte_len, s.batch_count,
       s.max_timestamp, coalesce(o.size_bytes, 0), s.sparse
FROM spans s LEFT JOIN objects o ON o.object_key = s.object_key
WHERE s.topic_id = $1 AND s.partition = $2 AND s.max_timestamp >= $3
  AND s.last_offset >= greatest($4, (SELECT log_start_offset FROM partitions
                                     WHERE topic_id = $1 AND partition = $2))
ORDER BY s.base_offset
LIMIT 1
