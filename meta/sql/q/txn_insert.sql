INSERT INTO txn_ids (transactional_id, producer_id, producer_epoch, last_producer_id,
                     last_producer_epoch, timeout_ms, state, start_ms, updated_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
