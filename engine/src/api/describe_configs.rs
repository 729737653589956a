//! DescribeConfigs (key 32): topics (their own configs, the cluster's
//! topic defaults, Kafka's defaults), the agent itself and the cluster
//! default (BROKER), groups and client-metrics subscriptions.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::access::allowed;
use super::config_support::{broker_configs, dynamic_allowed, dynamic_resource};
use super::{str_bytes, Api, Req};
use crate::dynamic::{
    self, broker_effect, broker_spec, topic_synonyms, BrokerEffect, Configs,
    CLIENT_METRICS_CONFIGS, GROUP_CONFIGS, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC, SOURCE_CLIENT_METRICS,
    SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_BROKER_LOGGER, SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_GROUP, SOURCE_STATIC_BROKER,
};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::topics::{self, value_of, Effect, Kind, SOURCE_DEFAULT, SOURCE_TOPIC, TOPIC_CONFIGS};

/// DescribeConfigs, versions 1–4.
pub const API: Api<DescribeConfigsRequest> = Api::new(ApiKey::DescribeConfigs, 1, 4);

/// What the request asks of each config besides its value.
#[derive(Clone, Copy)]
struct Asked {
    synonyms: bool,
    documentation: bool,
}

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let asked = Asked {
        synonyms: body.include_synonyms,
        documentation: body.include_documentation,
    };
    let current = shard.agent.dynamic.copy.get();
    let mut results = Vec::new();
    for r in body.resources {
        let result = DescribeConfigsResult::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        let wanted = |k: &str| {
            r.configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|w| w.as_str() == k))
        };
        let name = r.resource_name.as_str();
        let described = match r.resource_type {
            RESOURCE_TOPIC => topic(shard, req, name, &current, asked).await,
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_GROUP | RESOURCE_CLIENT_METRICS => {
                dynamic_allowed(shard, req, op::DESCRIBE_CONFIGS, r.resource_type, name)
                    .and_then(|()| dynamic_resource(shard, r.resource_type, name))
                    .and_then(|()| own_broker(shard, r.resource_type, name))
                    .map(|()| match r.resource_type {
                        RESOURCE_BROKER => broker(shard, name, &current, asked),
                        RESOURCE_BROKER_LOGGER => loggers(),
                        RESOURCE_GROUP => defined(
                            GROUP_CONFIGS,
                            current.of(RESOURCE_GROUP, name),
                            SOURCE_GROUP,
                            asked,
                        ),
                        _ => defined(
                            CLIENT_METRICS_CONFIGS,
                            current.of(RESOURCE_CLIENT_METRICS, name),
                            SOURCE_CLIENT_METRICS,
                            asked,
                        ),
                    })
            }
            other => {
                let msg = format!("rutomq describes no configs of resource type {other}");
                tracing::info!(client = %req.client_id(), resource_type = other,
                    "DescribeConfigs refused: {msg}");
                Err((ErrorCode::InvalidRequest, Some(msg)))
            }
        };
        results.push(match described {
            Ok(configs) => result.with_configs(
                configs
                    .into_iter()
                    .filter(|c| wanted(c.name.as_str()))
                    .collect(),
            ),
            Err((code, msg)) => result
                .with_error_code(code.code())
                .with_error_message(msg.as_deref().map(str_bytes)),
        });
    }
    DescribeConfigsResponse::default().with_results(results)
}

type Described = Result<Vec<DescribeConfigsResourceResult>, (ErrorCode, Option<String>)>;

/// Each agent describes its own broker configs (its settings are its
/// own), as each Kafka broker does: another agent's id is refused.
fn own_broker(
    shard: &Shard,
    resource_type: i8,
    name: &str,
) -> Result<(), (ErrorCode, Option<String>)> {
    let me = shard.agent.agent_id;
    match name.parse::<i32>() {
        Ok(id) if resource_type == RESOURCE_BROKER && id != me => Err((
            ErrorCode::InvalidRequest,
            Some(format!(
                "this is agent {me}, not {id}: each agent describes its own configs"
            )),
        )),
        _ => Ok(()),
    }
}

/// A topic's configs: its own, else the cluster's default (a dynamic
/// broker config), else Kafka's; synonyms in Kafka's order.
async fn topic(shard: &Shard, req: &Req, name: &str, current: &Configs, asked: Asked) -> Described {
    // Kafka: DESCRIBE_CONFIGS on the topic.
    if !allowed(shard, req, op::DESCRIBE_CONFIGS, resource::TOPIC, name) {
        return Err((
            ErrorCode::TopicAuthorizationFailed,
            Some("Authorization failed.".into()),
        ));
    }
    let topic = match shard.topics.by_name(name).await {
        Ok(Some(t)) => t,
        Ok(None) => return Err((ErrorCode::UnknownTopicOrPartition, None)),
        Err(code) => return Err((code, None)),
    };
    let cluster = current.of(RESOURCE_BROKER, "");
    let defaults = current.topic_defaults();
    Ok(TOPIC_CONFIGS
        .iter()
        .map(|s| {
            let own = topic
                .configs
                .iter()
                .find(|(n, _)| n == s.name)
                .map(|(_, v)| v.as_str());
            let value = topics::config_value(&topic, defaults, s.name).unwrap_or(s.default);
            let source = match (own, defaults.get(s.name)) {
                (Some(_), _) => SOURCE_TOPIC,
                (None, Some(_)) => SOURCE_DYNAMIC_DEFAULT_BROKER,
                (None, None) => SOURCE_DEFAULT,
            };
            let mut synonyms = Vec::new();
            if asked.synonyms {
                synonyms.extend(own.map(|v| synonym(s.name, v, SOURCE_TOPIC)));
                let family = topic_synonyms(s.name);
                synonyms.extend(family.iter().filter_map(|(b, _)| {
                    value_of(cluster, b).map(|v| synonym(b, v, SOURCE_DYNAMIC_DEFAULT_BROKER))
                }));
                synonyms.extend(family.iter().filter_map(|(b, _)| {
                    broker_spec(b)?
                        .default
                        .map(|d| synonym(b, d, SOURCE_DEFAULT))
                }));
            }
            entry(s.name, Some(value), s.kind, source, synonyms).with_documentation(
                asked
                    .documentation
                    .then(|| str_bytes(&documentation(s.name))),
            )
        })
        .collect())
}

fn entry(
    name: &str,
    value: Option<&str>,
    kind: Kind,
    source: i8,
    synonyms: Vec<DescribeConfigsSynonym>,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(name))
        .with_value(value.map(str_bytes))
        .with_config_source(source)
        .with_synonyms(synonyms)
        .with_config_type(kind.code())
}

/// A BROKER resource: the agent's own id lists its settings (read-only,
/// as set by its flags), the topic defaults it applies and every broker
/// config set at runtime for it or the cluster; an empty name lists the
/// cluster default's configs.
fn broker(
    shard: &Shard,
    name: &str,
    current: &Configs,
    asked: Asked,
) -> Vec<DescribeConfigsResourceResult> {
    let cluster = current.of(RESOURCE_BROKER, "");
    let mine = current.of(RESOURCE_BROKER, name);
    let doc = |name: &str, what: String| {
        asked
            .documentation
            .then(|| str_bytes(&format!("{name}: on rutomq, {what}.")))
    };
    // A config Kafka does not define, or a password: its value is hidden.
    let hidden = |n: &str| broker_spec(n).is_none_or(|s| s.kind == Kind::Password);
    let dynamic_entry = |n: &str| {
        let family: Vec<&str> = match dynamic::broker_effect(n) {
            BrokerEffect::TopicDefault(t) => topic_synonyms(t)
                .iter()
                .map(|(b, _)| *b)
                .filter(|b| {
                    *b == n || broker_spec(b).is_some_and(|s| s.mode == dynamic::Mode::ReadOnly)
                })
                .collect(),
            _ => vec![n],
        };
        let spec = broker_spec(n);
        let kind = spec.map_or(Kind::String, |s| s.kind);
        let show = |v: &str| (!hidden(n)).then(|| v.to_owned());
        let (value, source) = match (value_of(mine, n), value_of(cluster, n)) {
            (Some(v), _) if !name.is_empty() => (show(v), SOURCE_DYNAMIC_BROKER),
            (_, Some(v)) => (show(v), SOURCE_DYNAMIC_DEFAULT_BROKER),
            _ => (
                spec.and_then(|s| s.default).map(str::to_owned),
                SOURCE_DEFAULT,
            ),
        };
        let mut synonyms = Vec::new();
        if asked.synonyms {
            let hide = hidden(n);
            let shown = |v| (!hide).then_some(v);
            if !name.is_empty() {
                synonyms.extend(
                    value_of(mine, n).map(|v| synonym_opt(n, shown(v), SOURCE_DYNAMIC_BROKER)),
                );
            }
            synonyms.extend(
                value_of(cluster, n)
                    .map(|v| synonym_opt(n, shown(v), SOURCE_DYNAMIC_DEFAULT_BROKER)),
            );
            if !name.is_empty() {
                synonyms.extend(family.iter().filter_map(|b| {
                    broker_spec(b)?
                        .default
                        .map(|d| synonym(b, d, SOURCE_DEFAULT))
                }));
            }
        }
        let what = match broker_effect(n) {
            BrokerEffect::TopicDefault(t) => format!("the cluster's default of topic config {t}"),
            BrokerEffect::Custom => "not a Kafka broker config: stored and described, no effect".into(),
            _ => "accepted and stored, no effect on rutomq (it tunes Kafka broker internals rutomq does not have)".into(),
        };
        // As Kafka: a name it does not define is also read-only.
        entry(n, value.as_deref(), kind, source, synonyms)
            .with_is_sensitive(hidden(n))
            .with_read_only(spec.is_none())
            .with_documentation(doc(n, what))
    };
    if name.is_empty() {
        return cluster.iter().map(|(n, _)| dynamic_entry(n)).collect();
    }
    let statics = broker_configs(&shard.agent);
    let mut out: Vec<_> = statics
        .iter()
        .map(|c| {
            let synonyms = match (&c.value, asked.synonyms) {
                (Some(v), true) => vec![synonym(c.name, v, SOURCE_STATIC_BROKER)],
                _ => Vec::new(),
            };
            entry(
                c.name,
                c.value.as_deref(),
                c.kind,
                SOURCE_STATIC_BROKER,
                synonyms,
            )
            .with_read_only(true)
            .with_documentation(doc(c.name, c.doc.into()))
        })
        .collect();
    // The topic defaults rutomq applies, then whatever else is set.
    let mut names: Vec<&str> = dynamic::TOPIC_SYNONYMS
        .iter()
        .flat_map(|(_, syns)| syns.iter().map(|(b, _)| *b))
        .filter(|b| matches!(broker_effect(b), BrokerEffect::TopicDefault(_)))
        .chain(mine.iter().chain(cluster).map(|(n, _)| n.as_str()))
        .filter(|n| !statics.iter().any(|c| c.name == *n))
        .collect();
    names.sort_unstable();
    names.dedup();
    out.extend(names.into_iter().map(dynamic_entry));
    out
}

/// The agent's loggers and their levels now.
fn loggers() -> Vec<DescribeConfigsResourceResult> {
    crate::logging::describe()
        .into_iter()
        .map(|(name, level)| {
            entry(
                &name,
                Some(level),
                Kind::String,
                SOURCE_DYNAMIC_BROKER_LOGGER,
                Vec::new(),
            )
        })
        .collect()
}

/// A group's or a subscription's configs: every one its kind defines,
/// set or at its default.
fn defined(
    specs: &[topics::ConfigSpec],
    set: &[(String, String)],
    set_source: i8,
    asked: Asked,
) -> Vec<DescribeConfigsResourceResult> {
    specs
        .iter()
        .map(|s| {
            let own = value_of(set, s.name);
            let (value, source) = match own {
                Some(v) => (v, set_source),
                None => (s.default, SOURCE_DEFAULT),
            };
            let synonyms = if asked.synonyms {
                vec![synonym(s.name, value, source)]
            } else {
                Vec::new()
            };
            entry(s.name, Some(value), s.kind, source, synonyms)
        })
        .collect()
}

fn synonym_opt(name: &str, value: Option<&str>, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(str_bytes(name))
        .with_value(value.map(str_bytes))
        .with_source(source)
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(str_bytes(name))
        .with_value(Some(str_bytes(value)))
        .with_source(source)
}

/// What the config does on rutomq (not Kafka's text: this broker's).
fn documentation(name: &str) -> String {
    match topics::effect(name) {
        Some(Effect::Applied) | None => format!("{name}: applied as Apache Kafka applies it."),
        Some(Effect::Inert(why)) => {
            format!("{name}: accepted and stored, no effect on rutomq: {why}.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::documentation;

    #[test]
    fn documentation_says_what_the_config_does_here() {
        assert!(documentation("retention.ms").contains("applied as Apache Kafka"));
        let inert = documentation("segment.bytes");
        assert!(
            inert.contains("no effect on rutomq") && inert.contains("segments"),
            "{inert}"
        );
        assert!(documentation("min.compaction.lag.ms").contains("applied as Apache Kafka"));
    }
}
