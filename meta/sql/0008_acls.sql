-- ACLs (issue 17): Kafka's bindings, one row each, with Kafka's codes:
-- resource_type (2 TOPIC .. 7 USER), pattern_type (3 LITERAL, 4 PREFIXED),
-- operation (2 ALL .. 15 TWO_PHASE_COMMIT), permission (2 DENY, 3 ALLOW).
-- Every agent keeps the whole set for its decisions; a change is announced
-- on rutomq_acls so each reloads at once.
CREATE TABLE acls (
    resource_type smallint NOT NULL CHECK (resource_type BETWEEN 2 AND 7),
    resource_name text     NOT NULL CHECK (resource_name <> ''),
    pattern_type  smallint NOT NULL CHECK (pattern_type IN (3, 4)),
    principal     text     NOT NULL,
    host          text     NOT NULL,
    operation     smallint NOT NULL CHECK (operation BETWEEN 2 AND 15),
    permission    smallint NOT NULL CHECK (permission IN (2, 3)),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission)
);

CREATE FUNCTION rutomq_acls_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rutomq_acls', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER acls_changed
    AFTER INSERT OR DELETE ON acls
    FOR EACH STATEMENT EXECUTE FUNCTION rutomq_acls_changed();
