-- Moves log start offsets forward (rows locked by the caller) and takes the
-- spans it retires off the retained size: those ending before the new start
-- and at or past the old one (the scan starts at the span holding the old
-- start, so spans retired before and not dropped yet are not read).
UPDATE partitions p
SET log_start_offset = u.log_start,
    size_bytes = p.size_bytes - coalesce(
      (SELECT sum(s.byte_len) FROM spans s
       WHERE s.topic_id = p.topic_id AND s.partition = p.partition
         AND s.base_offset >= coalesce(
               (SELECT max(h.base_offset) FROM spans h
                WHERE h.topic_id = p.topic_id AND h.partition = p.partition
                  AND h.base_offset <= p.log_start_offset), 0)
         AND s.base_offset < u.log_start
         AND s.last_offset < u.log_start
         AND s.last_offset >= p.log_start_offset), 0)
FROM unnest($2::int[], $3::bigint[]) AS u(partition, log_start)
WHERE p.topic_id = $1 AND p.partition = u.partition
  AND p.log_start_offset < u.log_start AND u.log_start <= p.next_offset
