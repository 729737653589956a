-- Open transactions in the (locked) partitions of transactional id $1.
SELECT o.topic_id, o.partition, o.producer_id, o.first_offset
FROM open_txns o
JOIN txn_partitions tp ON tp.topic_id = o.topic_id AND tp.partition = o.partition
WHERE tp.transactional_id = $1
