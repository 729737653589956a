-- Deletes up to $1 markers below their partition's log start. Per partition
-- a primary-key range scan from its first marker (never a scan of every
-- marker), as drop_retired_spans.sql does for spans.
WITH doomed AS (
    SELECT d.topic_id, d.partition, d.marker_offset
    FROM partitions p
    CROSS JOIN LATERAL (
        SELECT m.topic_id, m.partition, m.marker_offset
        FROM markers m
        WHERE m.topic_id = p.topic_id AND m.partition = p.partition
          AND m.marker_offset < p.log_start_offset
        ORDER BY m.marker_offset
        LIMIT $1) d
    LIMIT $1
)
DELETE FROM markers m USING doomed d
WHERE m.topic_id = d.topic_id AND m.partition = d.partition
  AND m.marker_offset = d.marker_offset
