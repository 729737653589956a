-- Client quotas (issue 17): Kafka's client quota entities with their
-- values, one row per (entity, key). An entity names a user, a client id
-- and an IP, each absent (kind 0), the default (kind 1, Kafka's <default>)
-- or named (kind 2, the name beside it); names are '' unless named.
-- Every agent keeps the whole set for its throttling; a change is
-- announced on rutomq_quotas so each reloads at once.
CREATE TABLE client_quotas (
    user_kind   smallint NOT NULL CHECK (user_kind BETWEEN 0 AND 2),
    user_name   text     NOT NULL,
    client_kind smallint NOT NULL CHECK (client_kind BETWEEN 0 AND 2),
    client_name text     NOT NULL,
    ip_kind     smallint NOT NULL CHECK (ip_kind BETWEEN 0 AND 2),
    ip_name     text     NOT NULL,
    key         text     NOT NULL,
    value       double precision NOT NULL,
    PRIMARY KEY (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, key),
    CHECK (user_kind + client_kind + ip_kind > 0),
    CHECK (ip_kind = 0 OR (user_kind = 0 AND client_kind = 0))
);

CREATE FUNCTION rutomq_quotas_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rutomq_quotas', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER client_quotas_changed
    AFTER INSERT OR UPDATE OR DELETE ON client_quotas
    FOR EACH STATEMENT EXECUTE FUNCTION rutomq_quotas_changed();
