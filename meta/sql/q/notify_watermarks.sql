SELECT pg_notify('rutomq_watermarks', $1)
