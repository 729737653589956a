-- Deletes committed offsets under the coordinator epoch. Returns the rows
-- deleted, or no row at all when the writer is fenced.
WITH g AS (
    SELECT 1 FROM groups WHERE group_id = $1 AND coordinator_epoch = $2 FOR SHARE
), d AS (
    DELETE FROM group_offsets o
    WHERE o.group_id = $1 AND EXISTS (SELECT 1 FROM g)
      AND (o.topic_id, o.partition) IN (SELECT * FROM unnest($3::uuid[], $4::int[]))
    RETURNING 1
)
SELECT (SELECT count(*) FROM d) FROM g
