-- One resource's dynamic configs.
SELECT name, value
FROM dynamic_configs
WHERE resource_type = $1 AND resource = $2
ORDER BY name
