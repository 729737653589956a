-- rutomq metadata schema, version 13: streams groups (KIP-1071).
-- A group kind's group-level state that is not per member: a streams
-- group's topology, as its members sent it (empty for other kinds).
ALTER TABLE groups ADD COLUMN group_data bytea NOT NULL DEFAULT '\x';
