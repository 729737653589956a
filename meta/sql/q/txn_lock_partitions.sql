-- The partitions of transactional id $1's open transaction, locked in key
-- order (as window commits lock them) before the transaction row is.
SELECT p.topic_id, p.partition, p.next_offset, p.log_start_offset, p.lso_pin, p.abort_seq
FROM partitions p
JOIN txn_partitions tp ON tp.topic_id = p.topic_id AND tp.partition = p.partition
WHERE tp.transactional_id = $1
ORDER BY p.topic_id, p.partition
FOR UPDATE OF p
