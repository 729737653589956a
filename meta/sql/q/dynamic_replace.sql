-- Stores one resource's dynamic configs, names $3 and values $4 (unnested
-- in step), its old ones deleted by DYNAMIC_CLEAR first; reports how many
-- the other resources store.
WITH added AS (
    INSERT INTO dynamic_configs (resource_type, resource, name, value)
    SELECT $1, $2, n, v FROM unnest($3::text[], $4::text[]) AS t(n, v)
)
SELECT count(*) FROM dynamic_configs WHERE (resource_type, resource) <> ($1, $2)
