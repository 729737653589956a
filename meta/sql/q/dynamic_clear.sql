-- Deletes one resource's dynamic configs (DYNAMIC_REPLACE stores the new).
DELETE FROM dynamic_configs WHERE resource_type = $1 AND resource = $2
