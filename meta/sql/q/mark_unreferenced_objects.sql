-- The backstop for objects whose last spans went without being marked
-- (topic deletion, or spans of one object dropped concurrently): due for
-- deletion after $2 seconds, like retired ones.
UPDATE objects o SET delete_after = now() + make_interval(secs => $2)
WHERE o.delete_after IS NULL
  AND o.created_at < now() - make_interval(secs => $1)
  AND NOT EXISTS (SELECT 1 FROM spans s WHERE s.object_key = o.object_key)
