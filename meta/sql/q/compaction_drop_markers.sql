-- Markers past their delete horizon $4 (ms) that a pass removes.
DELETE FROM markers
WHERE topic_id = $1 AND partition = $2 AND marker_offset = ANY($3::bigint[])
  AND delete_horizon_ms <= $4
