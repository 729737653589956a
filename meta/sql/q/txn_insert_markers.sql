INSERT INTO markers (topic_id, partition, marker_offset, producer_id, producer_epoch,
                     committed, coordinator_epoch, timestamp_ms, first_offset)
SELECT u.topic_id, u.partition, u.marker_offset, $4, $5, $6, $7, $8, u.first_offset
FROM unnest($1::uuid[], $2::int[], $3::bigint[], $9::bigint[])
     AS u(topic_id, partition, marker_offset, first_offset)
