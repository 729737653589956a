-- Every committed change to a topic row (CreateTopics, CreatePartitions,
-- DeleteTopics, config changes) is announced on rutomq_topics with the
-- topic's name, so that every shard of every agent drops its cached copy at
-- once instead of serving the old one until its cache entry expires (a
-- producer that had just seen CreatePartitions succeed was told the new
-- partitions did not exist). PostgreSQL delivers the notification when the
-- changing transaction commits, and folds repeats within one.
CREATE FUNCTION rutomq_topic_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('rutomq_topics', OLD.name);
    ELSE
        PERFORM pg_notify('rutomq_topics', NEW.name);
        IF TG_OP = 'UPDATE' AND OLD.name IS DISTINCT FROM NEW.name THEN
            PERFORM pg_notify('rutomq_topics', OLD.name);
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER topics_changed
    AFTER INSERT OR UPDATE OR DELETE ON topics
    FOR EACH ROW EXECUTE FUNCTION rutomq_topic_changed();
