-- One entity's value of one quota key removed (0 rows when it had none).
DELETE FROM client_quotas
WHERE user_kind = $1 AND user_name = $2 AND client_kind = $3 AND client_name = $4
  AND ip_kind = $5 AND ip_name = $6 AND key = $7
