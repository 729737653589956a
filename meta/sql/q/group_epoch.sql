SELECT 1 FROM groups WHERE group_id = $1 AND coordinator_epoch = $2
