-- Every SCRAM credential (each agent keeps a copy for logins), at most $1.
SELECT user_name, mechanism, salt, stored_key, server_key, iterations
FROM scram_credentials ORDER BY user_name, mechanism LIMIT $1
