DELETE FROM objects o
WHERE o.object_key = ANY($1::text[])
  AND NOT EXISTS (SELECT 1 FROM spans s WHERE s.object_key = o.object_key)
