UPDATE objects o SET delete_after = now()
WHERE o.delete_after IS NULL
  AND o.created_at < now() - make_interval(secs => $1)
  AND NOT EXISTS (SELECT 1 FROM spans s WHERE s.object_key = o.object_key)
