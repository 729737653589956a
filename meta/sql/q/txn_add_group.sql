INSERT INTO txn_groups (transactional_id, group_id) VALUES ($1, $2)
ON CONFLICT DO NOTHING
