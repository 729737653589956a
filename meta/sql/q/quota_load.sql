-- Every client quota value (each agent keeps a copy for its throttling), at most $1.
SELECT user_kind, user_name, client_kind, client_name, ip_kind, ip_name, key, value
FROM client_quotas
ORDER BY user_kind, user_name, client_kind, client_name, ip_kind, ip_name, key
LIMIT $1
