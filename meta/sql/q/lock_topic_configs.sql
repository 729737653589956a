SELECT configs::text FROM topics WHERE name = $1 FOR UPDATE
