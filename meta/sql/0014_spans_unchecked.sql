-- rutomq metadata schema, version 14: spans without per-row foreign keys.
--
-- A window commit inserts a span per partition it touched; at 10,000
-- partitions the two foreign-key checks were half of each span's insert
-- (7.5 of 15.7 µs, benches/results/2026-12-06-scaling.md). What they
-- guarded holds by construction or moves to the (rare) deletion side:
--
-- spans -> objects: every writer of spans inserts their object's row in the
--   same transaction (the window commit, the compaction swap), and an
--   object row goes only when no span references it (forget_objects.sql).
-- spans -> partitions ON DELETE CASCADE: the trigger below. A window commit
--   holds its partitions FOR NO KEY UPDATE and a compaction swap its
--   compaction row FOR UPDATE, so a partition's deletion waits for either:
--   for the swap in the foreign-key cascade to `compaction`, whose trigger
--   ("RI_ConstraintTrigger_...") fires before this one, as AFTER triggers
--   of one event fire in name order. The trigger's DELETE then runs with a
--   snapshot of its own (a PL/pgSQL statement in READ COMMITTED) and sees
--   the spans they committed. It fires for whoever deletes the partition:
--   agents of an older version (their topic deletion is the same single
--   statement) and an operator's psql alike. (Named to sort after the
--   foreign-key triggers: engine/tests/retention.rs fails with a name that
--   sorts first.)
CREATE FUNCTION drop_partition_spans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM spans WHERE topic_id = OLD.topic_id AND partition = OLD.partition;
    RETURN NULL;
END
$$;
CREATE TRIGGER partitions_drop_spans AFTER DELETE ON partitions
    FOR EACH ROW EXECUTE FUNCTION drop_partition_spans();
ALTER TABLE spans DROP CONSTRAINT spans_object_key_fkey;
ALTER TABLE spans DROP CONSTRAINT spans_topic_id_partition_fkey;
