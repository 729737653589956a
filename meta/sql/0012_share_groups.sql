-- Share groups (KIP-932, issue 18). A share group is a row of `groups`
-- (group_type 'share': its members and subscriptions, stored by its
-- coordinator). Each partition it consumes has a share-partition state:
-- the start offset (SPSO: below it every record is acknowledged or
-- archived) and the in-flight window (records available, acquired by a
-- member until a deadline, acknowledged or archived, with delivery
-- counts), encoded by the agents (engine/src/share/partition.rs).
--
-- Any agent serves any consumer: a change is a compare-and-set on
-- `version` (read, decide, UPDATE ... WHERE version = read), so two
-- agents handing out records of one partition never give one record to
-- two members. `state_epoch` moves when the start is set from outside
-- (AlterShareGroupOffsets, Kafka's state epoch).
CREATE TABLE share_partitions (
    group_id     text    NOT NULL REFERENCES groups (group_id) ON DELETE CASCADE,
    topic_id     uuid    NOT NULL,
    partition    integer NOT NULL,
    version      bigint  NOT NULL DEFAULT 0,
    state_epoch  integer NOT NULL DEFAULT 0,
    start_offset bigint  NOT NULL,
    state        bytea   NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition) ON DELETE CASCADE
);
CREATE INDEX share_partitions_partition ON share_partitions (topic_id, partition);
