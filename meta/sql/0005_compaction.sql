-- rutomq metadata schema, version 5: log compaction.
--
-- A compacted partition is rewritten by one agent at a time: the one that
-- holds its `compaction` row's lease. Each pass writes the surviving
-- batches into new objects and, in one transaction, replaces the spans it
-- read by spans over those objects (offsets unchanged), removes the
-- markers it may and stamps the ones that wait for their horizon.

-- Per compacted partition: the owner's lease, the cleaner checkpoint and
-- what compaction took off the log so far.
CREATE TABLE compaction (
    topic_id        uuid        NOT NULL,
    partition       integer     NOT NULL,
    -- the agent compacting the partition, and until when it may
    owner           integer     NOT NULL,
    lease_until     timestamptz NOT NULL,
    -- raised on every change of owner: a pass commits only under the
    -- epoch it claimed (fencing a previous owner that lost its lease)
    epoch           bigint      NOT NULL DEFAULT 1,
    -- Kafka's cleaner checkpoint: offsets below are clean (deduplicated by
    -- a pass), the dirty part starts here
    cleaned_to      bigint      NOT NULL DEFAULT 0,
    -- bytes compaction removed from the retained log: the retained size is
    -- partitions.size_bytes minus this (kept here so that a pass never
    -- writes the partition row, which every window commit locks)
    bytes_removed   bigint      NOT NULL DEFAULT 0,
    -- the earliest delete horizon a pass stamped (a tombstone or marker
    -- that may go then): a pass is due at that time even with no new data
    next_horizon_ms bigint,
    passes          bigint      NOT NULL DEFAULT 0,
    last_pass_ms    bigint      NOT NULL DEFAULT -1,
    PRIMARY KEY (topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE
);

-- A span written by compaction: its batches keep their own base offsets
-- (stored in the batch header), with gaps between them where records went;
-- the last batch still ends at last_offset (kept as an empty batch if need
-- be), so the spans of a partition go on covering every offset.
ALTER TABLE spans ADD COLUMN sparse boolean NOT NULL DEFAULT false;

-- When a marker with no data of its transaction left may be removed
-- (Kafka's delete horizon for control batches); null: not yet eligible.
ALTER TABLE markers ADD COLUMN delete_horizon_ms bigint;
