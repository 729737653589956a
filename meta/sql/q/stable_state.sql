-- One snapshot of what read_committed fetches of a partition need: the
-- offsets, the abort count, and the aborted transactions whose marker is at
-- or after $3, lowest first offsets first, at most $4 (+1 tells the list
-- was cut).
SELECT p.next_offset, p.log_start_offset, coalesce(least(p.lso_pin, p.next_offset), p.next_offset),
       p.abort_seq,
       ARRAY(SELECT m.producer_id FROM markers m
             WHERE m.topic_id = $1 AND m.partition = $2 AND NOT m.committed
               AND m.first_offset IS NOT NULL AND m.marker_offset >= $3
             ORDER BY m.first_offset, m.marker_offset LIMIT $4::bigint + 1),
       ARRAY(SELECT m.first_offset FROM markers m
             WHERE m.topic_id = $1 AND m.partition = $2 AND NOT m.committed
               AND m.first_offset IS NOT NULL AND m.marker_offset >= $3
             ORDER BY m.first_offset, m.marker_offset LIMIT $4::bigint + 1),
       ARRAY(SELECT m.marker_offset FROM markers m
             WHERE m.topic_id = $1 AND m.partition = $2 AND NOT m.committed
               AND m.first_offset IS NOT NULL AND m.marker_offset >= $3
             ORDER BY m.first_offset, m.marker_offset LIMIT $4::bigint + 1)
FROM partitions p
WHERE p.topic_id = $1 AND p.partition = $2
