-- Partitions of group $1 with offsets waiting for a transaction to end.
SELECT DISTINCT t.name, o.partition
FROM txn_offsets o JOIN topics t ON t.topic_id = o.topic_id
WHERE o.group_id = $1
