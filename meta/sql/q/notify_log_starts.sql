SELECT pg_notify('rutomq_log_starts', $1)
