-- rutomq metadata schema, version 1.
-- Offsets are allocated here, in commit order, one transaction per flush
-- window; spans map offset ranges to byte ranges of immutable objects.

CREATE TABLE agents (
    agent_id      integer PRIMARY KEY,
    host          text        NOT NULL,
    port          integer     NOT NULL,
    rack          text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    lease_until   timestamptz NOT NULL
);
CREATE SEQUENCE agent_id_seq START 1 MAXVALUE 2147483647;

CREATE TABLE topics (
    topic_id      uuid        PRIMARY KEY,
    name          text        NOT NULL UNIQUE,
    partitions    integer     NOT NULL CHECK (partitions > 0),
    configs       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE partitions (
    topic_id          uuid    NOT NULL REFERENCES topics (topic_id) ON DELETE CASCADE,
    partition         integer NOT NULL CHECK (partition >= 0),
    -- high watermark: the offset the next committed record gets
    next_offset       bigint  NOT NULL DEFAULT 0,
    log_start_offset  bigint  NOT NULL DEFAULT 0,
    max_timestamp     bigint  NOT NULL DEFAULT -1,
    PRIMARY KEY (topic_id, partition)
);

CREATE TABLE objects (
    object_key    text        PRIMARY KEY,
    size_bytes    bigint      NOT NULL,
    agent_id      integer     NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- set when no span references the object any more (topic deleted)
    delete_after  timestamptz
);

CREATE TABLE spans (
    topic_id       uuid    NOT NULL,
    partition      integer NOT NULL,
    base_offset    bigint  NOT NULL,
    last_offset    bigint  NOT NULL,
    object_key     text    NOT NULL REFERENCES objects (object_key),
    byte_start     bigint  NOT NULL,
    byte_len       integer NOT NULL,
    batch_count    integer NOT NULL,
    max_timestamp  bigint  NOT NULL,
    PRIMARY KEY (topic_id, partition, base_offset),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE,
    CHECK (last_offset >= base_offset)
);
CREATE INDEX spans_object ON spans (object_key);

CREATE SEQUENCE producer_id_seq START 1000;

-- Idempotent producer state per partition: the last five batches, so a
-- retried batch is answered with its original offsets.
CREATE TABLE producer_state (
    producer_id     bigint   NOT NULL,
    topic_id        uuid     NOT NULL,
    partition       integer  NOT NULL,
    producer_epoch  smallint NOT NULL,
    -- the last five batches, flattened: first_seq, last_seq, base_offset, ...
    history         bigint[]  NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (producer_id, topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE
);
