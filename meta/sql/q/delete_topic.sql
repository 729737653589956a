WITH gone AS (DELETE FROM topics WHERE name = $1 RETURNING topic_id)
SELECT topic_id FROM gone
