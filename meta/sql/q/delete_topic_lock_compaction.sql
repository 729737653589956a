-- ... then its compaction rows, in key order: a compaction swap in progress
-- holds its partition's row from the fence on and takes the partition's
-- markers after it, while the cascade would take markers before compaction
-- rows (trigger order: markers' table is older), which deadlocked. Waiting
-- here, holding nothing a swap needs, the deletion runs after the swap's
-- commit; a swap that starts later is fenced by the deletion.
SELECT partition FROM compaction
WHERE topic_id = $1
ORDER BY partition
FOR UPDATE
