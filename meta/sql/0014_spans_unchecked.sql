-- rutomq metadata schema, version 14: spans without per-row foreign keys.
--
-- A window commit inserts a span per partition it touched; at 10,000
-- partitions the two foreign-key checks were half of each span's insert
-- (7.5 of 15.7 µs, benches/results/2026-12-06-scaling.md). What they
-- guarded holds by construction:
--
-- spans -> objects: every writer of spans inserts their object's row in the
--   same transaction (the window commit, the compaction swap), and an
--   object row goes only when no span references it (forget_objects.sql).
-- spans -> partitions (ON DELETE CASCADE): a window commit holds its
--   partitions FOR NO KEY UPDATE and a compaction swap its compaction row
--   FOR UPDATE (which cascades from the partition), so a topic's deletion
--   waits for either to end; delete_topic_spans.sql then drops the topic's
--   spans in a statement of its own, which sees what they committed.
ALTER TABLE spans DROP CONSTRAINT spans_object_key_fkey;
ALTER TABLE spans DROP CONSTRAINT spans_topic_id_partition_fkey;
