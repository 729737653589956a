INSERT INTO agents (agent_id, host, port, rack, lease_until)
VALUES (nextval('agent_id_seq'), $1, $2, $3, now() + make_interval(secs => $4))
RETURNING agent_id
