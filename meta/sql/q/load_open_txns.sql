SELECT o.producer_id, o.topic_id, o.partition, o.first_offset
FROM open_txns o
WHERE o.producer_id = ANY ($1::bigint[])
