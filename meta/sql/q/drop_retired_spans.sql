-- Deletes up to $1 spans that end before their partition's log start and
-- returns how many, with the objects they were in (each once). Per
-- partition a primary-key range scan from its first span (never a scan of
-- every span).
WITH doomed AS (
    SELECT d.topic_id, d.partition, d.base_offset
    FROM partitions p
    CROSS JOIN LATERAL (
        SELECT s.topic_id, s.partition, s.base_offset
        FROM spans s
        WHERE s.topic_id = p.topic_id AND s.partition = p.partition
          AND s.base_offset < p.log_start_offset
          AND s.last_offset < p.log_start_offset
        ORDER BY s.base_offset
        LIMIT $1) d
    LIMIT $1
), gone AS (
    DELETE FROM spans s USING doomed d
    WHERE s.topic_id = d.topic_id AND s.partition = d.partition
      AND s.base_offset = d.base_offset
    RETURNING s.object_key
)
SELECT count(*)::bigint, coalesce(array_agg(DISTINCT object_key), '{}'::text[]) FROM gone
