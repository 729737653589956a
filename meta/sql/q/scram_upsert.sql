INSERT INTO scram_credentials (user_name, mechanism, salt, stored_key, server_key, iterations)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (user_name, mechanism) DO UPDATE
SET salt = EXCLUDED.salt, stored_key = EXCLUDED.stored_key, server_key = EXCLUDED.server_key,
    iterations = EXCLUDED.iterations, updated_at = now()
