-- Fences never-committed uploads before the collector deletes them: a row
-- marked for deletion is inserted for each key nobody committed. A commit of
-- the same object that comes later fails on the primary key (and is retried
-- by its client); one that came first keeps its row, so the key is not
-- returned and the object is not touched.
INSERT INTO objects (object_key, size_bytes, agent_id, delete_after)
SELECT k, 0, 0, now() FROM unnest($1::text[]) AS k
ON CONFLICT (object_key) DO NOTHING
RETURNING object_key
