-- One ACL, exactly; 0 rows when it was already gone.
DELETE FROM acls
WHERE resource_type = $1 AND resource_name = $2 AND pattern_type = $3 AND principal = $4
  AND host = $5 AND operation = $6 AND permission = $7
