//! Topic names, configs and creation shared by Metadata and CreateTopics.

use rutomq_meta::{CreateTopicError, TopicRecord};

use crate::error::ErrorCode;
use crate::limits::TOPIC_NAME_BYTES_MAX;
use crate::shard::Shard;

/// Kafka's default `max.message.bytes` (the default in [`TOPIC_CONFIGS`]).
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;

pub const RETENTION_MS: &str = "retention.ms";
pub const RETENTION_BYTES: &str = "retention.bytes";

/// Topic configs rutomq accepts, with their defaults (Kafka's).
pub const TOPIC_CONFIGS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.type", "producer"),
    ("max.message.bytes", "1048588"), // MAX_MESSAGE_BYTES_DEFAULT
    ("message.timestamp.type", "CreateTime"),
    ("retention.ms", "604800000"),
    ("retention.bytes", "-1"),
    ("segment.bytes", "1073741824"),
    ("min.insync.replicas", "1"),
];

/// Kafka's topic name rule: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(format!(
            "topic name must be 1 to {TOPIC_NAME_BYTES_MAX} characters"
        ));
    }
    if name == "." || name == ".." {
        return Err("topic name cannot be '.' or '..'".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "topic name {name:?} has characters other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Validates a config entry; values are kept as given.
pub fn valid_config(name: &str, value: Option<&str>) -> Result<(), String> {
    if !TOPIC_CONFIGS.iter().any(|(k, _)| *k == name) {
        return Err(format!("unknown or unsupported topic config {name:?}"));
    }
    let Some(v) = value else { return Ok(()) };
    match name {
        "max.message.bytes"
        | "retention.ms"
        | "retention.bytes"
        | "segment.bytes"
        | "min.insync.replicas" => v
            .parse::<i64>()
            .map(|_| ())
            .map_err(|_| format!("config {name} must be an integer, got {v:?}")),
        "cleanup.policy" if v != "delete" => Err("only cleanup.policy=delete is supported".into()),
        _ => Ok(()),
    }
}

/// An integer config of the topic, or its default.
pub fn config_i64(t: &TopicRecord, name: &str) -> Option<i64> {
    let set = t.configs.iter().find(|(k, _)| k == name);
    let value = match set {
        Some((_, v)) => v.as_str(),
        None => TOPIC_CONFIGS.iter().find(|(k, _)| *k == name)?.1,
    };
    value.parse().ok()
}

/// The topic's max.message.bytes.
pub fn max_message_bytes(t: &TopicRecord) -> usize {
    config_i64(t, "max.message.bytes")
        .and_then(|v| usize::try_from(v).ok())
        .unwrap_or(MAX_MESSAGE_BYTES_DEFAULT)
}

/// Creates a topic with the default partition count (Metadata auto-create);
/// a concurrent creation by someone else is fine.
pub async fn auto_create(shard: &Shard, name: &str) -> Result<Option<TopicRecord>, ErrorCode> {
    let partitions = shard.agent.cfg.default_partitions;
    match shard
        .agent
        .meta
        .create_topic(name.to_owned(), partitions, Vec::new())
        .await
    {
        Ok(Ok(t)) => {
            tracing::info!(topic = name, partitions, "auto-created topic");
            Ok(Some(t))
        }
        Ok(Err(CreateTopicError::AlreadyExists)) => {
            shard.topics.forget(name);
            shard.topics.by_name(name).await
        }
        Err(e) => Err(ErrorCode::from(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_max_message_bytes_is_the_config_tables() {
        let table = TOPIC_CONFIGS
            .iter()
            .find(|(k, _)| *k == "max.message.bytes")
            .map(|(_, v)| v.parse::<usize>().expect("a number"));
        assert_eq!(table, Some(MAX_MESSAGE_BYTES_DEFAULT));
    }
}
