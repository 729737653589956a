-- A change announcement: channel $1 (rutomq_watermarks, rutomq_log_starts),
-- payload $2; sent after the change committed (meta/src/notify.rs).
SELECT pg_notify($1, $2)
