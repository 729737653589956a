-- Anchored on the primary key: the span holding $3 (the last one starting
-- at or before it), then the following ones; never a scan of the history.
-- Transaction markers (one offset each, no object) come in offset order
-- with them: columns 9.. are null for data spans.
SELECT * FROM (
  (SELECT s.base_offset, s.last_offset, s.object_key, s.byte_start, s.byte_len, s.batch_count,
          s.max_timestamp, coalesce(o.size_bytes, 0), s.sparse,
          NULL::bigint, NULL::smallint, NULL::boolean, NULL::integer
   FROM spans s LEFT JOIN objects o ON o.object_key = s.object_key
   WHERE s.topic_id = $1 AND s.partition = $2
     AND s.base_offset >= coalesce(
           (SELECT max(base_offset) FROM spans
            WHERE topic_id = $1 AND partition = $2 AND base_offset <= $3), $3)
   ORDER BY s.base_offset
   LIMIT $4)
  UNION ALL
  (SELECT m.marker_offset, m.marker_offset, '', 0, 78, 1, m.timestamp_ms, 0::bigint, false,
          m.producer_id, m.producer_epoch, m.committed, m.coordinator_epoch
   FROM markers m
   WHERE m.topic_id = $1 AND m.partition = $2 AND m.marker_offset >= $3
   ORDER BY m.marker_offset
   LIMIT $4)
) x
ORDER BY 1
LIMIT $4
