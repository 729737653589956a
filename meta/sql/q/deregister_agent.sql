DELETE FROM agents WHERE agent_id = $1
