UPDATE agents SET lease_until = now() + make_interval(secs => $2) WHERE agent_id = $1
