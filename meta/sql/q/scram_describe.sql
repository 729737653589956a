-- The mechanisms and iteration counts of users $1 (all users: null).
SELECT user_name, mechanism, iterations
FROM scram_credentials
WHERE $1::text[] IS NULL OR user_name = ANY ($1::text[])
ORDER BY user_name, mechanism
