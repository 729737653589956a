SELECT object_key FROM objects
WHERE delete_after IS NOT NULL AND delete_after <= now()
ORDER BY delete_after
LIMIT $1
