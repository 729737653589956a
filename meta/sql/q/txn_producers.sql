-- Producers with state in partitions $2 of topic $1: idempotent sequence
-- state and open transactions (KIP-664 DescribeProducers).
SELECT coalesce(s.partition, o.partition), coalesce(s.producer_id, o.producer_id),
       coalesce(s.producer_epoch, t.producer_epoch, (-1)::smallint), s.history,
       coalesce((extract(epoch FROM s.updated_at) * 1000)::bigint, -1),
       coalesce(o.first_offset, -1)
FROM (SELECT * FROM producer_state WHERE topic_id = $1 AND partition = ANY ($2)) s
FULL JOIN (SELECT * FROM open_txns WHERE topic_id = $1 AND partition = ANY ($2)) o
  ON o.partition = s.partition AND o.producer_id = s.producer_id
LEFT JOIN txn_ids t ON t.producer_id = coalesce(s.producer_id, o.producer_id)
ORDER BY 1, 2
LIMIT $3
