UPDATE txn_ids
SET producer_id = $2, producer_epoch = $3, last_producer_id = $4, last_producer_epoch = $5,
    timeout_ms = $6, state = $7, start_ms = $8, updated_ms = $9
WHERE transactional_id = $1
