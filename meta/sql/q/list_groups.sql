SELECT group_id, group_type, protocol_type, state FROM groups ORDER BY group_id
