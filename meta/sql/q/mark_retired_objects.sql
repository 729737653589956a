-- Of the objects $1 whose spans were just dropped, marks those no span
-- references any more, due for deletion after $2 seconds (reads that
-- started before the log start moved still find them).
UPDATE objects o SET delete_after = now() + make_interval(secs => $2)
WHERE o.object_key = ANY($1::text[])
  AND o.delete_after IS NULL
  AND NOT EXISTS (SELECT 1 FROM spans s WHERE s.object_key = o.object_key)
