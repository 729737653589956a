//! What AlterConfigs and IncrementalAlterConfigs (and DescribeConfigs)
//! share: Kafka's config resource types and altering a topic's configs.

use super::access::allowed;
use super::Req;
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// `ConfigResource.Type` codes.
pub const RESOURCE_TOPIC: i8 = 2;

/// A resource's outcome: the error code and message of its response entry.
pub type Outcome = (ErrorCode, Option<String>);

/// The outcome of a resource type rutomq alters no configs of yet.
pub fn unserved(req: &Req, resource_type: i8, name: &str) -> Outcome {
    let msg = format!("rutomq does not alter configs of resource type {resource_type} yet");
    tracing::info!(client = %req.client_id(), api = ?req.key, resource_type, resource = %name,
        "config alteration refused: {msg}");
    (ErrorCode::InvalidRequest, Some(msg))
}

/// Alters topic `name`'s configs to what `edit` makes of them (refusing
/// with INVALID_CONFIG and its message), after the ALTER_CONFIGS check on
/// the topic; written to PostgreSQL unless `validate_only`, whence every
/// agent's shards drop their cached copy.
pub async fn alter_topic<F>(
    shard: &Shard,
    req: &Req,
    name: &str,
    validate_only: bool,
    edit: F,
) -> Outcome
where
    F: FnOnce(Vec<(String, String)>) -> Result<Vec<(String, String)>, String> + Send + 'static,
{
    if !allowed(shard, req, op::ALTER_CONFIGS, resource::TOPIC, name) {
        return (
            ErrorCode::TopicAuthorizationFailed,
            Some("Authorization failed.".into()),
        );
    }
    let altered = shard
        .agent
        .meta
        .alter_topic_configs(name.to_owned(), validate_only, edit)
        .await;
    match altered {
        Ok(Some(Ok(()))) => {
            if !validate_only {
                shard.topics.forget(name);
                tracing::info!(topic = %name, client = %req.client_id(), "altered topic configs");
            }
            (ErrorCode::None, None)
        }
        Ok(Some(Err(msg))) => {
            tracing::info!(topic = %name, reason = %msg, api = ?req.key, "topic config alteration refused");
            (ErrorCode::InvalidConfig, Some(msg))
        }
        Ok(None) => (
            ErrorCode::UnknownTopicOrPartition,
            Some(format!("topic {name:?} does not exist")),
        ),
        Err(e) => (ErrorCode::from(&e), Some(e.to_string())),
    }
}

/// The names that occur more than once among `names` (Kafka refuses a
/// request naming a resource, or a config of one resource, twice).
pub fn repeated<T: PartialEq>(names: impl Iterator<Item = T> + Clone) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for (i, n) in names.clone().enumerate() {
        if names.clone().skip(i + 1).any(|m| m == n) && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}
