-- rutomq metadata schema, version 2: retention.
--
-- partitions.size_bytes is the size of the retained log: the bytes of every
-- span that still holds an offset at or past the log start offset. Window
-- commits add to it; advancing the log start (retention, DeleteRecords)
-- takes the spans it retires off it. retention.bytes is checked against it.

ALTER TABLE partitions ADD COLUMN size_bytes bigint NOT NULL DEFAULT 0;

UPDATE partitions p SET size_bytes = coalesce(
    (SELECT sum(s.byte_len) FROM spans s
     WHERE s.topic_id = p.topic_id AND s.partition = p.partition
       AND s.last_offset >= p.log_start_offset), 0);

-- The collector picks objects whose deletion is due; few rows are marked at
-- any time, so a partial index keeps that from scanning every object.
CREATE INDEX objects_doomed ON objects (delete_after) WHERE delete_after IS NOT NULL;
