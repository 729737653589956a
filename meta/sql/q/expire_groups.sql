DELETE FROM groups g
WHERE g.state = 'Empty' AND g.state_since < now() - $1 * interval '1 millisecond'
  AND g.group_type <> 'share'
  AND NOT EXISTS (SELECT 1 FROM group_offsets o WHERE o.group_id = g.group_id)
