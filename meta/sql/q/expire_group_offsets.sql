-- Kafka's offsets.retention.minutes (KIP-211): the offsets of a group that
-- has been empty for the retention period expire, then the group itself.
WITH expired AS (
    DELETE FROM group_offsets o
    USING groups g
    WHERE o.group_id = g.group_id AND g.state = 'Empty'
      AND greatest(g.state_since, o.committed_at) < now() - $1 * interval '1 millisecond'
    RETURNING o.group_id
)
SELECT count(*) FROM expired
