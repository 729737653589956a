-- One entity's value of one quota key, set or replaced.
INSERT INTO client_quotas (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, key, value)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, key)
DO UPDATE SET value = EXCLUDED.value
