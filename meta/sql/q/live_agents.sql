SELECT agent_id, host, port, rack, listener_names, listener_hosts, listener_ports
FROM agents WHERE lease_until > now() ORDER BY agent_id
