INSERT INTO agents (agent_id, host, port, rack, lease_until,
                    listener_names, listener_hosts, listener_ports)
VALUES (nextval('agent_id_seq'), $1, $2, $3, now() + make_interval(secs => $4), $5, $6, $7)
RETURNING agent_id
