-- Groups with members whose coordinator is not a live agent.
SELECT g.group_id FROM groups g
WHERE g.state <> 'Empty'
  AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.agent_id = g.coordinator_agent
                  AND a.lease_until > now())
LIMIT $1
