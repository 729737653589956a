INSERT INTO producer_state (producer_id, topic_id, partition, producer_epoch, history)
SELECT u.producer_id, u.topic_id, u.partition, u.producer_epoch, u.history::bigint[]
FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::smallint[], $5::text[])
     AS u(producer_id, topic_id, partition, producer_epoch, history)
ON CONFLICT (producer_id, topic_id, partition) DO UPDATE
SET producer_epoch = excluded.producer_epoch,
    history = excluded.history,
    updated_at = now()
