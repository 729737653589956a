-- Every ACL (each agent keeps a copy for its decisions), at most $1.
SELECT resource_type, resource_name, pattern_type, principal, host, operation, permission
FROM acls ORDER BY resource_type, resource_name, pattern_type, principal, host, operation, permission
LIMIT $1
