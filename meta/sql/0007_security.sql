-- rutomq metadata schema, version 7: named listeners and SCRAM credentials.
--
-- An agent registers the advertised address of each of its listeners; a
-- client is told the addresses of the listener it connected to (Kafka's
-- advertised.listeners). host/port stay the first listener's.
ALTER TABLE agents ADD COLUMN listener_names text[]    NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN listener_hosts text[]    NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN listener_ports integer[] NOT NULL DEFAULT '{}';

-- SCRAM credentials (RFC 5802): the salt, StoredKey = H(HMAC(SaltedPassword,
-- "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key") and the
-- iteration count. Never a password. mechanism: Kafka's ScramMechanism
-- codes, 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
CREATE TABLE scram_credentials (
    user_name   text     NOT NULL,
    mechanism   smallint NOT NULL CHECK (mechanism IN (1, 2)),
    salt        bytea    NOT NULL,
    stored_key  bytea    NOT NULL,
    server_key  bytea    NOT NULL,
    iterations  integer  NOT NULL CHECK (iterations > 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_name, mechanism)
);

-- Every committed change is announced on rutomq_credentials (with the user
-- name), so every agent reloads its copy at once: a removed credential
-- stops working everywhere within the notification's delivery.
CREATE FUNCTION rutomq_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('rutomq_credentials', OLD.user_name);
    ELSE
        PERFORM pg_notify('rutomq_credentials', NEW.user_name);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER scram_credentials_changed
    AFTER INSERT OR UPDATE OR DELETE ON scram_credentials
    FOR EACH ROW EXECUTE FUNCTION rutomq_credentials_changed();
