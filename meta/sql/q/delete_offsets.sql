DELETE FROM group_offsets o
USING groups g
WHERE o.group_id = $1 AND g.group_id = $1 AND g.coordinator_epoch = $2
  AND (o.topic_id, o.partition) IN (SELECT * FROM unnest($3::uuid[], $4::int[]))
