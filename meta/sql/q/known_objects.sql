SELECT object_key FROM objects WHERE object_key = ANY($1::text[])
