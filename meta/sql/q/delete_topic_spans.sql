-- A deleted topic's spans, in a statement after the topic's deletion: that
-- waited for the window commits and compaction swaps writing spans of its
-- partitions, and this statement's snapshot sees what they committed.
DELETE FROM spans WHERE topic_id = $1
