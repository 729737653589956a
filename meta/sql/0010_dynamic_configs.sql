-- Dynamic configs (issue 18): configs set at runtime through the Kafka
-- protocol (IncrementalAlterConfigs, AlterConfigs), one row per
-- (resource, config). resource_type is Kafka's ConfigResource.Type: 4
-- BROKER (resource '' is the cluster default, Kafka's --entity-default;
-- otherwise an agent id), 16 CLIENT_METRICS (a subscription's name), 32
-- GROUP (a group id). Topic configs stay on their topic row. Every agent
-- keeps the whole set; a change is announced on rutomq_configs so each
-- reloads at once.
CREATE TABLE dynamic_configs (
    resource_type smallint NOT NULL CHECK (resource_type IN (4, 16, 32)),
    resource      text     NOT NULL,
    name          text     NOT NULL,
    value         text     NOT NULL,
    PRIMARY KEY (resource_type, resource, name)
);

CREATE FUNCTION rutomq_configs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rutomq_configs', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER dynamic_configs_changed
    AFTER INSERT OR UPDATE OR DELETE ON dynamic_configs
    FOR EACH STATEMENT EXECUTE FUNCTION rutomq_configs_changed();
