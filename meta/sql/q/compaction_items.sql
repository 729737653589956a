-- The spans and markers of partition ($1, $2) from the span holding $3 up
-- to (not including) offset $4, in offset order, at most $5: what a
-- compaction pass reads. Marker columns (9..) are null for spans.
SELECT * FROM (
  (SELECT s.base_offset, s.last_offset, s.object_key, s.byte_start, s.byte_len, s.batch_count,
          s.max_timestamp, coalesce(o.size_bytes, 0), s.sparse,
          NULL::bigint, NULL::smallint, NULL::boolean, NULL::bigint, NULL::bigint
   FROM spans s LEFT JOIN objects o ON o.object_key = s.object_key
   WHERE s.topic_id = $1 AND s.partition = $2
     AND s.base_offset >= coalesce(
           (SELECT max(base_offset) FROM spans
            WHERE topic_id = $1 AND partition = $2 AND base_offset <= $3), $3)
     AND s.base_offset < $4
   ORDER BY s.base_offset
   LIMIT $5)
  UNION ALL
  (SELECT m.marker_offset, m.marker_offset, '', 0, 0, 0, m.timestamp_ms, 0::bigint, false,
          m.producer_id, m.producer_epoch, m.committed, m.first_offset, m.delete_horizon_ms
   FROM markers m
   WHERE m.topic_id = $1 AND m.partition = $2 AND m.marker_offset >= $3 AND m.marker_offset < $4
   ORDER BY m.marker_offset
   LIMIT $5)
) x
ORDER BY 1
LIMIT $5
