//! What AlterConfigs and IncrementalAlterConfigs (and DescribeConfigs)
//! share: altering a topic's configs and a dynamic resource's (broker,
//! group, client-metrics), the agent's settings under Kafka's names.

use rutomq_meta::dynamic::DynamicAlterError;

use super::access::allowed;
use super::Req;
use crate::dynamic::{
    Refusal, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

pub use crate::dynamic::RESOURCE_TOPIC;

/// One of an agent's settings under its Kafka broker config name.
pub struct BrokerConfig {
    pub name: &'static str,
    pub value: Option<String>,
    pub kind: crate::topics::Kind,
    /// What it is on rutomq (DescribeConfigs' documentation).
    pub doc: &'static str,
}

/// The agent's settings that Kafka names as broker configs, as
/// DescribeConfigs of the agent's own id shows them: read-only (set by
/// `rutomq serve`'s flags).
pub fn broker_configs(agent: &crate::agent::Agent) -> Vec<BrokerConfig> {
    use crate::topics::Kind;
    let sec = &agent.security;
    let join = |f: &dyn Fn(&crate::security::Listener) -> String| {
        sec.listeners.iter().map(f).collect::<Vec<_>>().join(",")
    };
    let c = |name, value: Option<String>, kind, doc| BrokerConfig {
        name,
        value,
        kind,
        doc,
    };
    let auth = sec.authorizer.as_ref();
    vec![
        c(
            "node.id",
            Some(agent.agent_id.to_string()),
            Kind::Int,
            "the agent's id, assigned by PostgreSQL when it registers",
        ),
        c(
            "broker.id",
            Some(agent.agent_id.to_string()),
            Kind::Int,
            "the agent's id (node.id)",
        ),
        c(
            "broker.rack",
            agent.cfg.rack.clone(),
            Kind::String,
            "--rack",
        ),
        c(
            "auto.create.topics.enable",
            Some(agent.cfg.auto_create_topics.to_string()),
            Kind::Boolean,
            "--auto-create-topics",
        ),
        c(
            "num.partitions",
            Some(agent.cfg.default_partitions.to_string()),
            Kind::Int,
            "--default-partitions",
        ),
        c(
            "default.replication.factor",
            Some("1".into()),
            Kind::Int,
            "records live in the object store, whose durability is its own; topics report factor 1",
        ),
        c(
            "transaction.max.timeout.ms",
            Some(agent.cfg.transaction_max_timeout_ms.to_string()),
            Kind::Int,
            "--transaction-max-timeout-ms",
        ),
        c(
            "transactional.id.expiration.ms",
            Some(agent.cfg.transactional_id_expiration_ms.to_string()),
            Kind::Int,
            "--transactional-id-expiration-ms",
        ),
        c(
            "listeners",
            Some(join(&|l| format!("{}://{}", l.name, l.bind))),
            Kind::String,
            "--listeners",
        ),
        c(
            "advertised.listeners",
            Some(join(&|l| {
                format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port)
            })),
            Kind::String,
            "--advertised-listeners",
        ),
        c(
            "listener.security.protocol.map",
            Some(join(&|l| format!("{}:{}", l.name, l.protocol.name()))),
            Kind::String,
            "--listener-security-protocol-map",
        ),
        c(
            "sasl.enabled.mechanisms",
            Some(
                sec.sasl_mechanisms
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Kind::List,
            "--sasl-enabled-mechanisms",
        ),
        c(
            "connections.max.reauth.ms",
            Some(sec.reauth.map_or(0, |d| d.as_millis() as u64).to_string()),
            Kind::Long,
            "--connections-max-reauth-ms",
        ),
        c(
            "super.users",
            auth.map(|a| a.super_users.join(";")),
            Kind::String,
            "--super-users",
        ),
        c(
            "allow.everyone.if.no.acl.found",
            auth.map(|a| a.allow_if_no_acl.to_string()),
            Kind::Boolean,
            "--allow-everyone-if-no-acl-found",
        ),
    ]
}

/// A resource's outcome: the error code and message of its response entry.
pub type Outcome = (ErrorCode, Option<String>);

/// The outcome of a resource type the request cannot alter.
pub fn unserved(req: &Req, resource_type: i8, name: &str) -> Outcome {
    let msg = format!(
        "{:?} does not alter configs of resource type {resource_type}",
        req.key
    );
    tracing::info!(client = %req.client_id(), api = ?req.key, resource_type, resource = %name,
        "config alteration refused: {msg}");
    (ErrorCode::InvalidRequest, Some(msg))
}

/// Whether the request may alter (`operation` ALTER_CONFIGS) or describe
/// (DESCRIBE_CONFIGS) the configs of a dynamic resource, as Kafka decides:
/// groups by the group, the rest by the cluster. The refusal's outcome
/// otherwise.
pub fn dynamic_allowed(
    shard: &Shard,
    req: &Req,
    operation: i8,
    resource_type: i8,
    name: &str,
) -> Result<(), Outcome> {
    let (ok, code) = if resource_type == RESOURCE_GROUP {
        (
            allowed(shard, req, operation, resource::GROUP, name),
            ErrorCode::GroupAuthorizationFailed,
        )
    } else {
        (
            allowed(shard, req, operation, resource::CLUSTER, CLUSTER_NAME),
            ErrorCode::ClusterAuthorizationFailed,
        )
    };
    if ok {
        Ok(())
    } else {
        Err((code, Some("Authorization failed.".into())))
    }
}

/// Whether `name` names a resource of `resource_type` this agent keeps
/// configs for: a broker is the cluster default ('') or a registered
/// agent's id (each BROKER_LOGGER this agent alone); groups and
/// subscriptions need a name.
pub fn dynamic_resource(shard: &Shard, resource_type: i8, name: &str) -> Result<(), Outcome> {
    let invalid = |msg: String| Err((ErrorCode::InvalidRequest, Some(msg)));
    match resource_type {
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
            if name.is_empty() && resource_type == RESOURCE_BROKER {
                return Ok(());
            }
            let Ok(id) = name.parse::<i32>() else {
                return invalid(format!("broker id must be an integer, not {name:?}"));
            };
            let me = shard.agent.agent_id;
            if resource_type == RESOURCE_BROKER_LOGGER && id != me {
                return invalid(format!(
                    "this is agent {me}, not {id}: each agent's loggers are its own"
                ));
            }
            let known = id == me
                || shard
                    .agent
                    .cluster
                    .read()
                    .is_ok_and(|c| c.iter().any(|a| a.agent_id == id));
            if known {
                Ok(())
            } else {
                invalid(format!("no agent has id {id}"))
            }
        }
        RESOURCE_GROUP if name.is_empty() => invalid("group name must not be empty".into()),
        RESOURCE_CLIENT_METRICS if name.is_empty() => {
            invalid("client metrics subscription name must not be empty".into())
        }
        RESOURCE_GROUP | RESOURCE_CLIENT_METRICS => Ok(()),
        _ => invalid(format!(
            "resource type {resource_type} has no dynamic configs"
        )),
    }
}

/// Alters the configs of dynamic resource `name` of `resource_type` to
/// what `edit` makes of them, after the ACL check: written to PostgreSQL
/// unless `validate_only` (the request then calls [`reload_dynamic`] once).
pub async fn alter_dynamic<F>(
    shard: &Shard,
    req: &Req,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    edit: F,
) -> Outcome
where
    F: FnOnce(Vec<(String, String)>) -> Result<Vec<(String, String)>, Refusal> + Send + 'static,
{
    if let Err(refused) = dynamic_allowed(shard, req, op::ALTER_CONFIGS, resource_type, name)
        .and_then(|()| dynamic_resource(shard, resource_type, name))
    {
        return refused;
    }
    let meta = &shard.agent.meta;
    match meta
        .dynamic_alter(resource_type, name.to_owned(), validate_only, edit)
        .await
    {
        Ok(Ok(())) => {
            if !validate_only {
                tracing::info!(resource_type, resource = %name, client = %req.client_id(), "altered dynamic configs");
            }
            (ErrorCode::None, None)
        }
        Ok(Err(r)) => {
            tracing::info!(resource_type, resource = %name, reason = %r.message, api = ?req.key,
                "config alteration refused");
            (r.code, Some(r.message))
        }
        Err(e @ DynamicAlterError::TooMany) => (ErrorCode::InvalidRequest, Some(e.to_string())),
        Err(DynamicAlterError::Meta(e)) => (ErrorCode::from(&e), Some(e.to_string())),
    }
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

/// After a request altered dynamic configs (a broker's, group's or
/// subscription's, with success): this agent's copy reloaded once, so its
/// next request sees the change (the others reload on `rutomq_configs`).
pub async fn reload_dynamic(shard: &Shard, altered: impl IntoIterator<Item = (i8, i16)>) {
    let dynamic = [RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_CLIENT_METRICS];
    if altered
        .into_iter()
        .any(|(t, code)| code == 0 && dynamic.contains(&t))
    {
        if let Err(e) = shard.agent.dynamic.reload(&shard.agent.meta).await {
            tracing::warn!(error = %e, "configs stored, but cannot reload them (the refresher will)");
        }
    }
}

/// The outcome of a resource the request names twice.
pub fn named_twice(name: &str) -> Outcome {
    (
        ErrorCode::InvalidRequest,
        Some(format!("resource {name:?} is named twice in the request")),
    )
}

/// The outcome of a config one resource names twice.
pub fn config_twice(name: &str) -> Outcome {
    (
        ErrorCode::InvalidRequest,
        Some(format!("config {name:?} is named twice for one resource")),
    )
}

/// The names that occur more than once among `names` (Kafka refuses a
/// request naming a resource, or a config of one resource, twice), in
/// order (look one up with `binary_search`): a request of many entries
/// costs n log n, not n².
pub fn repeated<T: Ord>(names: impl Iterator<Item = T>) -> Vec<T> {
    let mut all: Vec<T> = names.collect();
    all.sort_unstable();
    let mut out: Vec<T> = Vec::new();
    let mut it = all.into_iter().peekable();
    while let Some(n) = it.next() {
        if it.peek() == Some(&n) && out.last() != Some(&n) {
            out.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::repeated;

    #[test]
    fn repeated_names_are_found_once_each() {
        assert_eq!(
            repeated(["b", "a", "b", "c", "a", "b"].into_iter()),
            vec!["a", "b"]
        );
        assert!(repeated(["x", "y"].into_iter()).is_empty());
        // Many entries: sorted, not compared pairwise.
        let many = (0..200_000).map(|i| i % 100_000);
        assert_eq!(repeated(many).len(), 100_000);
    }
}
