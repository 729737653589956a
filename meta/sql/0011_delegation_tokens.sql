-- Delegation tokens (issue 18): Kafka's tokens, one row each. The HMAC
-- (HMAC-SHA512 of the id under the agents' shared secret) identifies a
-- token in RenewDelegationToken and ExpireDelegationToken; it is the
-- token's password, so only its SHA-256 is kept (agents recompute the HMAC
-- from the secret to describe a token). A client logs in
-- with SCRAM as the token id with the HMAC (base64) as its password, so
-- the SCRAM credentials of that password are kept per mechanism (1
-- SCRAM-SHA-256, 2 SCRAM-SHA-512), made once when the token is. Every
-- agent keeps the whole set; a change is announced on rutomq_tokens.
CREATE TABLE delegation_tokens (
    token_id   text     PRIMARY KEY,
    hmac_hash  bytea    NOT NULL UNIQUE,
    owner      text     NOT NULL,
    requester  text     NOT NULL,
    renewers   text[]   NOT NULL,
    issue_ms   bigint   NOT NULL,
    expiry_ms  bigint   NOT NULL,
    max_ms     bigint   NOT NULL,
    iterations integer  NOT NULL,
    salt256    bytea    NOT NULL,
    stored256  bytea    NOT NULL,
    server256  bytea    NOT NULL,
    salt512    bytea    NOT NULL,
    stored512  bytea    NOT NULL,
    server512  bytea    NOT NULL
);

CREATE FUNCTION rutomq_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rutomq_tokens', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER delegation_tokens_changed
    AFTER INSERT OR UPDATE OR DELETE ON delegation_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION rutomq_tokens_changed();
