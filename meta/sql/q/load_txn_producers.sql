-- The transactional ids of producers $1 with their open transaction's
-- partitions, share-locked: EndTxn (which locks them for update after the
-- same partitions) waits for this commit, or this commit sees its end.
SELECT t.producer_id, t.producer_epoch, t.state,
       coalesce(ARRAY(SELECT tp.topic_id FROM txn_partitions tp
                      WHERE tp.transactional_id = t.transactional_id
                      ORDER BY tp.topic_id, tp.partition), '{}'),
       coalesce(ARRAY(SELECT tp.partition FROM txn_partitions tp
                      WHERE tp.transactional_id = t.transactional_id
                      ORDER BY tp.topic_id, tp.partition), '{}')
FROM txn_ids t
WHERE t.producer_id = ANY ($1::bigint[])
FOR SHARE OF t
