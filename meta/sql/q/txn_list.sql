SELECT t.transactional_id, t.producer_id, t.state, t.start_ms
FROM txn_ids t
WHERE ($1::text[] IS NULL OR t.state = ANY ($1))
  AND ($2::bigint[] IS NULL OR t.producer_id = ANY ($2))
ORDER BY t.transactional_id
LIMIT $3
