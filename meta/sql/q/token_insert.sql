-- A new delegation token.
INSERT INTO delegation_tokens (token_id, hmac_hash, owner, requester, renewers, issue_ms, expiry_ms,
    max_ms, iterations, salt256, stored256, server256, salt512, stored512, server512)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
