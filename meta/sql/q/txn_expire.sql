-- Transactional ids with no open transaction, idle since before $1 (ms
-- since the epoch), at most $2 of them: forgotten (their partitions,
-- groups and pending offsets go with them).
DELETE FROM txn_ids
WHERE transactional_id IN (
    SELECT transactional_id FROM txn_ids
    WHERE state <> 'Ongoing' AND updated_ms < $1
    ORDER BY updated_ms
    LIMIT $2)
