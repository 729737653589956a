-- Writes a group as its coordinator holds it. A new group ($2 = 0) is
-- inserted with epoch 1; a known one is updated only under the epoch its
-- coordinator loaded. No row back: the writer is fenced.
INSERT INTO groups AS g (group_id, group_type, protocol_type, protocol_name, generation,
                         leader_id, state, state_since, coordinator_epoch, coordinator_agent,
                         member_ids, instance_ids, client_ids, client_hosts,
                         session_timeouts_ms, rebalance_timeouts_ms, subscriptions, assignments,
                         assignment_epoch, group_data)
SELECT $1, $3, $4, $5, $6, $7, $8, to_timestamp($9::bigint / 1000.0), 1, $10,
       $11, $12, $13, $14, $15, $16, $17, $18, $19, $20
WHERE $2::bigint = 0
ON CONFLICT (group_id) DO NOTHING
RETURNING g.coordinator_epoch
