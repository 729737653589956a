-- Anchored on the primary key: the span holding $3 (the last one starting
-- at or before it), then the following ones; never a scan of the history.
SELECT s.base_offset, s.last_offset, s.object_key, s.byte_start, s.byte_len, s.batch_count,
       s.max_timestamp, coalesce(o.size_bytes, 0)
FROM spans s LEFT JOIN objects o ON o.object_key = s.object_key
WHERE s.topic_id = $1 AND s.partition = $2
  AND s.base_offset >= coalesce(
        (SELECT max(base_offset) FROM spans
         WHERE topic_id = $1 AND partition = $2 AND base_offset <= $3), $3)
ORDER BY s.base_offset
LIMIT $4
