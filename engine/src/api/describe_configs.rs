//! DescribeConfigs (key 32) for topics and for the agent itself (BROKER).

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::access::allowed;
use super::config_support::{
    broker_configs, RESOURCE_BROKER, RESOURCE_TOPIC, SOURCE_STATIC_BROKER,
};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;
use crate::topics::{self, Effect, SOURCE_DEFAULT, SOURCE_TOPIC, TOPIC_CONFIGS};

/// DescribeConfigs, versions 1–4.
pub const API: Api<DescribeConfigsRequest> = Api::new(ApiKey::DescribeConfigs, 1, 4);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
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
        if r.resource_type == RESOURCE_BROKER {
            let asked = (body.include_synonyms, body.include_documentation);
            results.push(broker(shard, req, result, asked, wanted));
            continue;
        }
        if r.resource_type != RESOURCE_TOPIC {
            let msg = format!("rutomq describes no configs of resource type {} yet", r.resource_type);
            tracing::info!(client = %req.client_id(), resource_type = r.resource_type,
                "DescribeConfigs refused: {msg}");
            results.push(
                result
                    .with_error_code(ErrorCode::InvalidRequest.code())
                    .with_error_message(Some(str_bytes(&msg))),
            );
            continue;
        }
        // Kafka: DESCRIBE_CONFIGS on the topic.
        if !allowed(shard, req, op::DESCRIBE_CONFIGS, resource::TOPIC, &r.resource_name) {
            results.push(
                result
                    .with_error_code(ErrorCode::TopicAuthorizationFailed.code())
                    .with_error_message(Some(str_bytes("Authorization failed."))),
            );
            continue;
        }
        let topic = match shard.topics.by_name(r.resource_name.as_str()).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                results.push(result.with_error_code(ErrorCode::UnknownTopicOrPartition.code()));
                continue;
            }
            Err(code) => {
                results.push(result.with_error_code(code.code()));
                continue;
            }
        };
        let configs = TOPIC_CONFIGS
            .iter()
            .filter(|s| wanted(s.name))
            .map(|s| {
                let set = topic.configs.iter().find(|(n, _)| n == s.name);
                let value = set.map_or(s.default, |(_, v)| v.as_str());
                let mut synonyms = Vec::new();
                if body.include_synonyms {
                    if let Some((_, v)) = set {
                        synonyms.push(synonym(s.name, v, SOURCE_TOPIC));
                    }
                    synonyms.push(synonym(s.name, s.default, SOURCE_DEFAULT));
                }
                DescribeConfigsResourceResult::default()
                    .with_name(str_bytes(s.name))
                    .with_value(Some(str_bytes(value)))
                    .with_config_source(if set.is_some() {
                        SOURCE_TOPIC
                    } else {
                        SOURCE_DEFAULT
                    })
                    .with_synonyms(synonyms)
                    .with_config_type(s.kind.code())
                    .with_documentation(
                        body.include_documentation
                            .then(|| str_bytes(&documentation(s.name))),
                    )
            })
            .collect();
        results.push(result.with_configs(configs));
    }
    DescribeConfigsResponse::default().with_results(results)
}

/// A BROKER resource: the agent's own id is its settings (read-only, as
/// set by its flags); an empty name the cluster-wide dynamic defaults
/// (none: no broker config is dynamic yet); another id is refused, as Kafka
/// refuses it (each agent describes itself).
fn broker(
    shard: &Shard,
    req: &Req,
    result: DescribeConfigsResult,
    (with_synonyms, with_documentation): (bool, bool),
    wanted: impl Fn(&str) -> bool,
) -> DescribeConfigsResult {
    let fail = |r: DescribeConfigsResult, code: ErrorCode, msg: String| {
        r.with_error_code(code.code())
            .with_error_message(Some(str_bytes(&msg)))
    };
    // Kafka: DESCRIBE_CONFIGS on the cluster.
    if !allowed(shard, req, op::DESCRIBE_CONFIGS, resource::CLUSTER, CLUSTER_NAME) {
        return fail(
            result,
            ErrorCode::ClusterAuthorizationFailed,
            "Authorization failed.".into(),
        );
    }
    let name = result.resource_name.to_string();
    if name.is_empty() {
        return result;
    }
    let me = shard.agent.agent_id;
    match name.parse::<i32>() {
        Err(_) => {
            return fail(
                result,
                ErrorCode::InvalidRequest,
                format!("broker id must be an integer, not {name:?}"),
            )
        }
        Ok(id) if id != me => {
            return fail(
                result,
                ErrorCode::InvalidRequest,
                format!("this is agent {me}, not {id}: each agent describes its own configs"),
            )
        }
        Ok(_) => {}
    }
    let configs = broker_configs(&shard.agent)
        .into_iter()
        .filter(|c| wanted(c.name))
        .map(|c| {
            let synonyms = match (&c.value, with_synonyms) {
                (Some(v), true) => vec![synonym(c.name, v, SOURCE_STATIC_BROKER)],
                _ => Vec::new(),
            };
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(c.name))
                .with_value(c.value.as_deref().map(str_bytes))
                .with_read_only(true)
                .with_config_source(SOURCE_STATIC_BROKER)
                .with_synonyms(synonyms)
                .with_config_type(c.kind.code())
                .with_documentation(
                    with_documentation
                        .then(|| str_bytes(&format!("{}: on rutomq, {}.", c.name, c.doc))),
                )
        })
        .collect();
    result.with_configs(configs)
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
        Some(Effect::Inert(why)) => format!("{name}: accepted and stored, no effect on rutomq: {why}."),
    }
}

#[cfg(test)]
mod tests {
    use super::documentation;

    #[test]
    fn documentation_says_what_the_config_does_here() {
        assert!(documentation("retention.ms").contains("applied as Apache Kafka"));
        let inert = documentation("segment.bytes");
        assert!(inert.contains("no effect on rutomq") && inert.contains("segments"), "{inert}");
        assert!(documentation("min.compaction.lag.ms").contains("applied as Apache Kafka"));
    }
}
