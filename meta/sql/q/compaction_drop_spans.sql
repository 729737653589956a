-- The spans a pass replaces, by base offset; returns their sizes and
-- objects (fewer rows than asked: the log changed under the pass).
DELETE FROM spans
WHERE topic_id = $1 AND partition = $2 AND base_offset = ANY($3::bigint[])
RETURNING byte_len, object_key
