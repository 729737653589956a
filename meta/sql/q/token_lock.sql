-- The token of HMAC $1, locked for its renewal or expiry.
SELECT token_id, owner, renewers, expiry_ms, max_ms
FROM delegation_tokens
WHERE hmac = $1
FOR UPDATE
