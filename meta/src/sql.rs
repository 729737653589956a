//! Every SQL statement the metadata layer runs, from `meta/sql/q/`.

macro_rules! statements {
    ($($name:ident => $file:literal),* $(,)?) => {
        $(pub const $name: &str = include_str!(concat!("../sql/q/", $file));)*
    };
}

statements! {
    LOCK_PARTITIONS => "lock_partitions.sql",
    LOAD_PRODUCER_STATE => "load_producer_state.sql",
    INSERT_OBJECTS => "insert_objects.sql",
    INSERT_SPANS => "insert_spans.sql",
    ADVANCE_PARTITIONS => "advance_partitions.sql",
    UPSERT_PRODUCER_STATE => "upsert_producer_state.sql",
    NOTIFY_WATERMARKS => "notify_watermarks.sql",
    FETCH_SPANS => "fetch_spans.sql",
    PARTITION_OFFSETS => "partition_offsets.sql",
    SPAN_BY_TIMESTAMP => "span_by_timestamp.sql",
    SPAN_MAX_TIMESTAMP => "span_max_timestamp.sql",
    CREATE_TOPIC => "create_topic.sql",
    CREATE_PARTITIONS => "create_partitions.sql",
    LOAD_TOPICS => "load_topics.sql",
    LOAD_TOPICS_BY_NAME => "load_topics_by_name.sql",
    LOAD_TOPIC_BY_ID => "load_topic_by_id.sql",
    LOCK_TOPIC => "lock_topic.sql",
    SET_TOPIC_PARTITIONS => "set_topic_partitions.sql",
    DELETE_TOPIC => "delete_topic.sql",
    REGISTER_AGENT => "register_agent.sql",
    RENEW_AGENT => "renew_agent.sql",
    DEREGISTER_AGENT => "deregister_agent.sql",
    LIVE_AGENTS => "live_agents.sql",
    NEXT_PRODUCER_ID => "next_producer_id.sql",
    MARK_UNREFERENCED_OBJECTS => "mark_unreferenced_objects.sql",
    OBJECTS_TO_DELETE => "objects_to_delete.sql",
    FORGET_OBJECTS => "forget_objects.sql",
    CLAIM_UNKNOWN_OBJECTS => "claim_unknown_objects.sql",
    RETENTION_STARTS => "retention_starts.sql",
    LOCK_TOPIC_PARTITIONS => "lock_topic_partitions.sql",
    ADVANCE_LOG_START => "advance_log_start.sql",
    NOTIFY_LOG_STARTS => "notify_log_starts.sql",
    DROP_RETIRED_SPANS => "drop_retired_spans.sql",
    MARK_RETIRED_OBJECTS => "mark_retired_objects.sql",
}
