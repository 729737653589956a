-- rutomq metadata schema, version 4: transactions (Kafka's classic protocol).
--
-- A transactional id's state is one txn_ids row; every change to it is one
-- PostgreSQL transaction holding that row's lock, taken after the locks of
-- the partitions it touches (the order window commits take them in, so the
-- two never deadlock). Ending a transaction writes its markers, its
-- consumer offsets and every partition's last stable offset in the same
-- transaction: atomic across partitions.

CREATE TABLE txn_ids (
    -- bytes: Kafka strings may hold NUL, which text cannot
    transactional_id     bytea    PRIMARY KEY,
    producer_id          bigint   NOT NULL,
    producer_epoch       smallint NOT NULL,
    -- the previous producer id and epoch (KIP-360 bumps, id rotation)
    last_producer_id     bigint   NOT NULL DEFAULT -1,
    last_producer_epoch  smallint NOT NULL DEFAULT -1,
    timeout_ms           integer  NOT NULL,
    -- Empty, Ongoing, CompleteCommit or CompleteAbort: the states a
    -- transaction rests in (the Prepare states last one PostgreSQL transaction)
    state                text     NOT NULL,
    -- when the open transaction began (its first partition or group), -1: none
    start_ms             bigint   NOT NULL DEFAULT -1,
    updated_ms           bigint   NOT NULL
);
CREATE UNIQUE INDEX txn_ids_producer ON txn_ids (producer_id);
CREATE INDEX txn_ids_open ON txn_ids (start_ms) WHERE state = 'Ongoing';
CREATE INDEX txn_ids_idle ON txn_ids (updated_ms) WHERE state <> 'Ongoing';

-- The partitions of the open transaction (AddPartitionsToTxn). No foreign
-- key to partitions: its share lock would order this insert after window
-- commits holding the partition, against the lock order above.
CREATE TABLE txn_partitions (
    transactional_id bytea   NOT NULL REFERENCES txn_ids ON DELETE CASCADE,
    topic_id         uuid    NOT NULL,
    partition        integer NOT NULL,
    PRIMARY KEY (transactional_id, topic_id, partition)
);

-- The groups of the open transaction (AddOffsetsToTxn).
CREATE TABLE txn_groups (
    transactional_id bytea NOT NULL REFERENCES txn_ids ON DELETE CASCADE,
    group_id         text  NOT NULL,
    PRIMARY KEY (transactional_id, group_id)
);

-- Offsets committed inside the open transaction (TxnOffsetCommit): they
-- move to group_offsets when it commits and go when it aborts.
CREATE TABLE txn_offsets (
    transactional_id  bytea   NOT NULL REFERENCES txn_ids ON DELETE CASCADE,
    group_id          text    NOT NULL,
    topic_id          uuid    NOT NULL,
    partition         integer NOT NULL,
    committed_offset  bigint  NOT NULL,
    leader_epoch      integer NOT NULL DEFAULT -1,
    metadata          bytea,
    PRIMARY KEY (transactional_id, group_id, topic_id, partition)
);
CREATE INDEX txn_offsets_group ON txn_offsets (group_id);

-- Per partition, the producers with an open transaction holding data there
-- and the offset of its first batch: the last stable offset never passes it.
CREATE TABLE open_txns (
    topic_id      uuid    NOT NULL,
    partition     integer NOT NULL,
    producer_id   bigint  NOT NULL,
    first_offset  bigint  NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE
);
CREATE INDEX open_txns_producer ON open_txns (producer_id);

-- COMMIT/ABORT control batches: one offset each, no object behind them
-- (Fetch builds the 78 bytes). An abort that left data in the partition
-- names its first offset: the aborted-transaction list of read_committed
-- fetches.
CREATE TABLE markers (
    topic_id           uuid     NOT NULL,
    partition          integer  NOT NULL,
    marker_offset      bigint   NOT NULL,
    producer_id        bigint   NOT NULL,
    producer_epoch     smallint NOT NULL,
    committed          boolean  NOT NULL,
    coordinator_epoch  integer  NOT NULL,
    timestamp_ms       bigint   NOT NULL,
    first_offset       bigint,
    PRIMARY KEY (topic_id, partition, marker_offset),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE
);
CREATE INDEX markers_aborted ON markers (topic_id, partition, first_offset)
    WHERE NOT committed AND first_offset IS NOT NULL;

-- lso_pin: the smallest first_offset in open_txns for the partition (null:
-- none; the last stable offset is then the high watermark).
-- abort_seq: aborts with data in the partition so far. Readers keep the
-- aborted list they know with the count it had; a count that jumps tells
-- them they missed one.
ALTER TABLE partitions ADD COLUMN lso_pin bigint;
ALTER TABLE partitions ADD COLUMN abort_seq bigint NOT NULL DEFAULT 0;
