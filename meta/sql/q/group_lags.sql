-- Per group and topic: partitions with a committed offset, and the records
-- behind the high watermark (summed and the largest), for consumer lag.
SELECT o.group_id, t.name, count(*)::bigint,
       sum(greatest(p.next_offset - o.committed_offset, 0))::bigint,
       max(greatest(p.next_offset - o.committed_offset, 0))::bigint
FROM group_offsets o
JOIN partitions p ON p.topic_id = o.topic_id AND p.partition = o.partition
JOIN topics t ON t.topic_id = o.topic_id
GROUP BY o.group_id, t.name
ORDER BY o.group_id, t.name
