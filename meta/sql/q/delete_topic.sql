-- Deletes a topic; its partitions and their per-partition rows go by
-- cascade, its spans by delete_topic_spans.sql after this (in the same
-- transaction).
DELETE FROM topics WHERE name = $1 RETURNING topic_id
