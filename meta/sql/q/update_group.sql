UPDATE groups AS g
SET group_type = $3, protocol_type = $4, protocol_name = $5, generation = $6,
    leader_id = $7, state = $8, state_since = to_timestamp($9::bigint / 1000.0),
    coordinator_agent = $10, member_ids = $11, instance_ids = $12, client_ids = $13,
    client_hosts = $14, session_timeouts_ms = $15, rebalance_timeouts_ms = $16,
    subscriptions = $17, assignments = $18, assignment_epoch = $19,
    group_data = $20
WHERE g.group_id = $1 AND g.coordinator_epoch = $2
RETURNING g.coordinator_epoch
