-- Anchored on the primary key: the span holding $3 (the last one starting
-- at or before it), then the following ones; never a scan of the history.
SELECT base_offset, last_offset, object_key, byte_start, byte_len, batch_count, max_timestamp
FROM spans
WHERE topic_id = $1 AND partition = $2
  AND base_offset >= coalesce(
        (SELECT max(base_offset) FROM spans
         WHERE topic_id = $1 AND partition = $2 AND base_offset <= $3), $3)
ORDER BY base_offset
LIMIT $4
