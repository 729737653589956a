-- A pass's swap holds the partition's compaction row, and only under the
-- lease and epoch it claimed.
SELECT 1 FROM compaction
WHERE topic_id = $1 AND partition = $2 AND owner = $3 AND epoch = $4 AND lease_until > now()
FOR UPDATE
