SELECT agent_id, host, port, rack FROM agents WHERE lease_until > now() ORDER BY agent_id
