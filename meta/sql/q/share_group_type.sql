SELECT group_type FROM groups WHERE group_id = $1
