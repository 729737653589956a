SELECT object_key FROM objects WHERE delete_after IS NOT NULL ORDER BY delete_after LIMIT $1
