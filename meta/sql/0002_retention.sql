-- rutomq metadata schema, version 2: retention.
--
-- partitions.size_bytes is the size of the retained log: the bytes of every
-- span that still holds an offset at or past the log start offset. Window
-- commits add to it; advancing the log start (retention, DeleteRecords)
-- takes the spans it retires off it. retention.bytes is checked against it.

-- Filling the column reads every span once; on a large history that can
-- take longer than the agents' session statement timeout.
SET LOCAL statement_timeout = 0;

ALTER TABLE partitions ADD COLUMN size_bytes bigint NOT NULL DEFAULT 0;

UPDATE partitions p SET size_bytes = r.bytes
FROM (SELECT s.topic_id, s.partition, sum(s.byte_len) AS bytes
      FROM spans s
      JOIN partitions q ON q.topic_id = s.topic_id AND q.partition = s.partition
      WHERE s.last_offset >= q.log_start_offset
      GROUP BY s.topic_id, s.partition) r
WHERE p.topic_id = r.topic_id AND p.partition = r.partition;

-- The collector picks objects whose deletion is due; few rows are marked at
-- any time, so a partial index keeps that from scanning every object.
CREATE INDEX objects_doomed ON objects (delete_after) WHERE delete_after IS NOT NULL;
