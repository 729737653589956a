-- rutomq metadata schema, version 3: consumer groups.
-- A group's coordinator is logical: any agent may load a group from here.
-- Loading bumps coordinator_epoch; every later write of that agent names
-- the epoch it loaded, so an agent that lost the group is fenced.

CREATE TABLE groups (
    group_id          text        PRIMARY KEY,
    -- 'classic' (JoinGroup/SyncGroup) or 'consumer' (KIP-848)
    group_type        text        NOT NULL DEFAULT 'classic',
    -- '' for a group that only commits offsets (no members ever)
    protocol_type     text        NOT NULL DEFAULT '',
    protocol_name     text,
    -- classic: generation; consumer (KIP-848): group epoch
    generation        integer     NOT NULL DEFAULT 0,
    -- consumer: epoch of the target assignment
    assignment_epoch  integer     NOT NULL DEFAULT 0,
    leader_id         text,
    -- 'Empty' or 'Stable': the states a group is stored in
    state             text        NOT NULL,
    state_since       timestamptz NOT NULL DEFAULT now(),
    coordinator_epoch bigint      NOT NULL DEFAULT 1,
    coordinator_agent integer,
    -- members of the stored generation, as parallel arrays
    member_ids        text[]      NOT NULL DEFAULT '{}',
    instance_ids      text[]      NOT NULL DEFAULT '{}',
    client_ids        text[]      NOT NULL DEFAULT '{}',
    client_hosts      text[]      NOT NULL DEFAULT '{}',
    session_timeouts_ms   integer[] NOT NULL DEFAULT '{}',
    rebalance_timeouts_ms integer[] NOT NULL DEFAULT '{}',
    -- each member's metadata for the selected protocol
    subscriptions     bytea[]     NOT NULL DEFAULT '{}',
    assignments       bytea[]     NOT NULL DEFAULT '{}'
);

-- Committed offsets. Offsets of a deleted topic go with it, as in Kafka.
CREATE TABLE group_offsets (
    group_id          text    NOT NULL REFERENCES groups (group_id) ON DELETE CASCADE,
    topic_id          uuid    NOT NULL,
    partition         integer NOT NULL,
    committed_offset  bigint  NOT NULL,
    leader_epoch      integer NOT NULL DEFAULT -1,
    -- bytes: Kafka strings may hold NUL, which text cannot
    metadata          bytea,
    committed_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE
);
CREATE INDEX group_offsets_partition ON group_offsets (topic_id, partition);
