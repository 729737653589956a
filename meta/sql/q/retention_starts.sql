-- Where retention moves each partition's log start offset, for topic $1:
-- past every leading span whose newest timestamp is older than $2 (ms; NULL
-- = no time limit), and past the leading spans that can go while the
-- retained log stays at or over $3 bytes (NULL = no size limit); Kafka's
-- rules, with a span in place of a segment: a leading prefix only, a span is
-- kept or retired whole, and retention.bytes keeps at least that much.
-- The retained size is partitions.size_bytes less what compaction removed.
-- Both walk the spans from the log start in offset order and stop at the
-- first one kept, so a round costs about the spans it retires.
SELECT p.partition, p.log_start_offset,
       greatest(
         p.log_start_offset,
         CASE WHEN $2::bigint IS NULL THEN p.log_start_offset ELSE coalesce(
           (SELECT s.base_offset FROM spans s
            WHERE s.topic_id = p.topic_id AND s.partition = p.partition
              AND s.last_offset >= p.log_start_offset AND s.max_timestamp >= $2
            ORDER BY s.base_offset LIMIT 1),
           p.next_offset) END,
         CASE WHEN $3::bigint IS NULL OR p.size_bytes - coalesce(c.bytes_removed, 0) <= $3 THEN p.log_start_offset ELSE coalesce(
           (SELECT x.base_offset
            FROM (SELECT s.base_offset,
                         sum(s.byte_len) OVER (ORDER BY s.base_offset) AS through
                  FROM spans s
                  WHERE s.topic_id = p.topic_id AND s.partition = p.partition
                    AND s.last_offset >= p.log_start_offset
                  ORDER BY s.base_offset) x
            WHERE p.size_bytes - coalesce(c.bytes_removed, 0) - x.through < $3
            ORDER BY x.base_offset LIMIT 1),
           -- Every span could go: only right with a limit of 0 (else the
           -- size counter is off, and the newest span stays).
           CASE WHEN $3 = 0 THEN p.next_offset ELSE
             (SELECT max(s.base_offset) FROM spans s
              WHERE s.topic_id = p.topic_id AND s.partition = p.partition) END,
           p.log_start_offset) END)
FROM partitions p
LEFT JOIN compaction c ON c.topic_id = p.topic_id AND c.partition = p.partition
WHERE p.topic_id = $1
ORDER BY p.partition
