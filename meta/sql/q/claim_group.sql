UPDATE groups
SET coordinator_epoch = coordinator_epoch + 1, coordinator_agent = $2
WHERE group_id = $1
RETURNING group_type, protocol_type, protocol_name, generation, leader_id, state,
          (extract(epoch FROM state_since) * 1000)::bigint, coordinator_epoch,
          member_ids, instance_ids, client_ids, client_hosts,
          session_timeouts_ms, rebalance_timeouts_ms, subscriptions, assignments,
          assignment_epoch, group_data
