-- The aborted transactions with data in partition ($1, $2) that began
-- below offset $3, by first offset, at most $4 + 1 (one more tells the
-- list was cut): (producer id, first offset, marker offset).
SELECT m.producer_id, m.first_offset, m.marker_offset
FROM markers m
WHERE m.topic_id = $1 AND m.partition = $2 AND NOT m.committed
  AND m.first_offset IS NOT NULL AND m.first_offset < $3
ORDER BY m.first_offset
LIMIT $4::bigint + 1
