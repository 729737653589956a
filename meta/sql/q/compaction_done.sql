-- A pass's outcome: the new checkpoint, the bytes it removed, the next
-- horizon it is due at; the lease ends.
UPDATE compaction
SET cleaned_to = greatest(cleaned_to, $3), bytes_removed = bytes_removed + $4,
    next_horizon_ms = $5, passes = passes + 1, last_pass_ms = $6, lease_until = now()
WHERE topic_id = $1 AND partition = $2
