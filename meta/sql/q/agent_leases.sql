SELECT agent_id, host, port, rack,
       (extract(epoch FROM started_at) * 1000)::float8,
       (extract(epoch FROM lease_until - now()) * 1000)::float8
FROM agents ORDER BY agent_id
