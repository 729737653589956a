-- Open transactions older than their timeout at $1 (ms since the epoch).
SELECT t.transactional_id
FROM txn_ids t
WHERE t.state = 'Ongoing' AND t.start_ms >= 0 AND t.start_ms + t.timeout_ms < $1
ORDER BY t.start_ms
LIMIT $2
