-- Agent $3 takes partition ($1, $2) for one pass of at most $4 seconds,
-- unless another live agent's lease runs (a dead owner's is void); every claim raises the epoch, which
-- the pass's swap must still find. Returns the epoch and the checkpoint.
INSERT INTO compaction AS c (topic_id, partition, owner, lease_until)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
ON CONFLICT (topic_id, partition) DO UPDATE
SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, epoch = c.epoch + 1
WHERE c.owner = EXCLUDED.owner OR c.lease_until < now()
   OR NOT EXISTS (SELECT 1 FROM agents a WHERE a.agent_id = c.owner AND a.lease_until > now())
RETURNING c.epoch, c.cleaned_to
