-- Every dynamic config (each agent keeps a copy), at most $1.
SELECT resource_type, resource, name, value
FROM dynamic_configs
ORDER BY resource_type, resource, name
LIMIT $1
