-- Markers whose transaction left no data: removable from their horizon on.
UPDATE markers m SET delete_horizon_ms = u.horizon
FROM unnest($3::bigint[], $4::bigint[]) AS u(marker_offset, horizon)
WHERE m.topic_id = $1 AND m.partition = $2 AND m.marker_offset = u.marker_offset
  AND m.delete_horizon_ms IS NULL
