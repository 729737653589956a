-- The token whose HMAC has SHA-256 $1, locked for its renewal or expiry.
SELECT token_id, owner, renewers, expiry_ms, max_ms
FROM delegation_tokens
WHERE hmac_hash = $1
FOR UPDATE
