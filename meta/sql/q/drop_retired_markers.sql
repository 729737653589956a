-- Markers below their partition's log start offset.
DELETE FROM markers m USING partitions p
WHERE m.topic_id = p.topic_id AND m.partition = p.partition
  AND m.marker_offset < p.log_start_offset
