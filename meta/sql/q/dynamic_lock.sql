-- Serializes the writers of one resource's dynamic configs until the
-- transaction ends (its rows may not exist yet to lock).
SELECT pg_advisory_xact_lock(hashtextextended($1::smallint::text || '/' || $2::text, 18))
