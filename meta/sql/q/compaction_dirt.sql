-- What the compactor needs to pick the partitions of compacted topic $1:
-- offsets, the retained size, the cleaner checkpoint, the bytes of spans
-- from the checkpoint on (dirty), the newest timestamp of the first dirty
-- span (how long dirty data has waited), the earliest stamped horizon, and
-- whether another live agent holds the partition's lease.
SELECT p.partition, p.log_start_offset, p.next_offset,
       least(coalesce(p.lso_pin, p.next_offset), p.next_offset),
       p.size_bytes - coalesce(c.bytes_removed, 0),
       greatest(coalesce(c.cleaned_to, 0), p.log_start_offset) AS dirty_from,
       coalesce((SELECT sum(s.byte_len) FROM spans s
                 WHERE s.topic_id = p.topic_id AND s.partition = p.partition
                   AND s.base_offset >= greatest(coalesce(c.cleaned_to, 0), p.log_start_offset)),
                0)::bigint,
       (SELECT s.max_timestamp FROM spans s
        WHERE s.topic_id = p.topic_id AND s.partition = p.partition
          AND s.base_offset >= greatest(coalesce(c.cleaned_to, 0), p.log_start_offset)
        ORDER BY s.base_offset LIMIT 1),
       c.next_horizon_ms,
       coalesce(c.owner <> $2 AND c.lease_until > now()
                AND EXISTS (SELECT 1 FROM agents a
                            WHERE a.agent_id = c.owner AND a.lease_until > now()), false)
FROM partitions p
LEFT JOIN compaction c ON c.topic_id = p.topic_id AND c.partition = p.partition
WHERE p.topic_id = $1
ORDER BY p.partition
