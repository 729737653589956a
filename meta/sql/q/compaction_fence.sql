-- A pass's swap holds the partition's compaction row, and only under the
-- lease and epoch it claimed. The row cascades from the partition, so a
-- topic's deletion waits for the swap (and then drops the spans it wrote:
-- 0014_spans_unchecked.sql) or, deleting first, fences it.
SELECT 1 FROM compaction
WHERE topic_id = $1 AND partition = $2 AND owner = $3 AND epoch = $4 AND lease_until > now()
FOR UPDATE
