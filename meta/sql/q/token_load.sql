-- Every delegation token not expired at $1 (each agent keeps a copy), at most $2.
SELECT token_id, hmac_hash, owner, requester, renewers, issue_ms, expiry_ms, max_ms, iterations,
       salt256, stored256, server256, salt512, stored512, server512
FROM delegation_tokens
WHERE expiry_ms >= $1
ORDER BY token_id
LIMIT $2
