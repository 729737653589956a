//! CreateTopics (key 19): partitions, configs, validate-only.

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use rutomq_meta::CreateTopicError;

use super::access::{allowed, visible};
use super::throttle::Mutations;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::limits::PARTITIONS_MAX;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;
use crate::topics;

/// CreateTopics, versions 2–7.
pub const API: Api<CreateTopicsRequest> = Api::new(ApiKey::CreateTopics, 2, 7);

pub async fn handle(shard: &Shard, req: &Req, body: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(body.topics.len());
    // Kafka: CREATE on the cluster, or on each topic.
    let cluster_create = visible(shard, req, op::CREATE, resource::CLUSTER, CLUSTER_NAME);
    // Kafka: strict from version 6.
    let mut mutations = Mutations::new(req, req.version >= 6);
    for t in body.topics {
        let mut result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_error_message(None)
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        let fail = |r: CreatableTopicResult, code: ErrorCode, msg: String| {
            r.with_error_code(code.code())
                .with_error_message(Some(str_bytes(&msg)))
        };
        let name = t.name.0.as_str().to_owned();
        if !cluster_create && !allowed(shard, req, op::CREATE, resource::TOPIC, &name) {
            results.push(fail(
                result,
                ErrorCode::TopicAuthorizationFailed,
                "Authorization failed.".into(),
            ));
            continue;
        }
        if let Err(msg) = topics::valid_name(&name) {
            results.push(fail(result, ErrorCode::InvalidTopicException, msg));
            continue;
        }
        // A manual assignment gives the partition count (and the factor
        // reported); it places nothing: any agent serves any partition.
        let mut replication_factor = t.replication_factor;
        let partitions = if !t.assignments.is_empty() {
            let agents = shard.agent.live_agent_ids();
            match assigned(&t, &agents) {
                Ok((n, rf)) => {
                    replication_factor = rf;
                    n
                }
                Err((code, msg)) => {
                    tracing::info!(topic = %name, reason = %msg, "CreateTopics refused a replica assignment");
                    results.push(fail(result, code, msg));
                    continue;
                }
            }
        } else if t.num_partitions == -1 {
            shard.agent.cfg.default_partitions
        } else {
            t.num_partitions
        };
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            results.push(fail(
                result,
                ErrorCode::InvalidPartitions,
                format!("partitions must be 1 to {PARTITIONS_MAX}"),
            ));
            continue;
        }
        // Data lives in object storage; replication is the store's business.
        if replication_factor != -1 && replication_factor < 1 {
            results.push(fail(
                result,
                ErrorCode::InvalidReplicationFactor,
                "replication factor must be -1 or >= 1".into(),
            ));
            continue;
        }
        let mut configs: Vec<(String, String)> = Vec::new();
        let mut bad = None;
        for c in &t.configs {
            let (name, value) = (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()));
            match topics::valid_config(name, value) {
                Ok(()) if configs.iter().any(|(n, _)| n == name) => {
                    bad = Some(format!("topic config {name} is given twice"));
                }
                Ok(()) => configs.extend(value.map(|v| (name.to_owned(), v.to_owned()))),
                Err(msg) => bad = Some(msg),
            }
        }
        if let Some(msg) = bad.or_else(|| topics::valid_together(&configs).err()) {
            tracing::info!(topic = %name, reason = %msg, "CreateTopics refused a config");
            results.push(fail(result, ErrorCode::InvalidConfig, msg));
            continue;
        }
        if !body.validate_only {
            if let Err(code) = mutations.admit(partitions) {
                results.push(result.with_error_code(code.code()));
                continue;
            }
        }
        let described: Vec<CreatableTopicConfigs> = topics::TOPIC_CONFIGS
            .iter()
            .map(|s| {
                let set = configs.iter().find(|(n, _)| n == s.name);
                CreatableTopicConfigs::default()
                    .with_name(str_bytes(s.name))
                    .with_value(Some(str_bytes(set.map_or(s.default, |(_, v)| v.as_str()))))
                    .with_config_source(if set.is_some() {
                        topics::SOURCE_TOPIC
                    } else {
                        topics::SOURCE_DEFAULT
                    })
            })
            .collect();
        result = result
            .with_num_partitions(partitions)
            .with_replication_factor(if replication_factor == -1 {
                1
            } else {
                replication_factor
            });
        // The configs are shown to those who may describe them (Kafka).
        result = if visible(shard, req, op::DESCRIBE_CONFIGS, resource::TOPIC, &name) {
            result.with_configs(Some(described))
        } else {
            result.with_topic_config_error_code(ErrorCode::TopicAuthorizationFailed.code())
        };
        if body.validate_only {
            match shard.topics.by_name(&name).await {
                Ok(Some(_)) => results.push(fail(
                    result,
                    ErrorCode::TopicAlreadyExists,
                    format!("topic {name:?} already exists"),
                )),
                Ok(None) => results.push(result),
                Err(code) => results.push(fail(result, code, "metadata unavailable".into())),
            }
            continue;
        }
        match shard
            .agent
            .meta
            .create_topic(name.clone(), partitions, configs)
            .await
        {
            Ok(Ok(rec)) => {
                tracing::info!(topic = name, partitions, "created topic");
                results.push(result.with_topic_id(rec.topic_id));
            }
            Ok(Err(CreateTopicError::AlreadyExists)) => results.push(fail(
                result,
                ErrorCode::TopicAlreadyExists,
                format!("topic {name:?} already exists"),
            )),
            Err(e) => results.push(fail(result, ErrorCode::from(&e), e.to_string())),
        }
    }
    drop(mutations);
    CreateTopicsResponse::default().with_topics(results)
}

/// A manual replica assignment checked as Kafka's controller checks one:
/// the partition count and replication factor it gives, or the refusal.
/// `agents` are the live agents' ids (Kafka's registered brokers). The
/// assignment places nothing: any agent serves any partition.
fn assigned(t: &CreatableTopic, agents: &[i32]) -> Result<(i32, i16), (ErrorCode, String)> {
    if t.replication_factor != -1 || t.num_partitions != -1 {
        return Err((
            ErrorCode::InvalidRequest,
            "a manual replica assignment needs replication factor and partition count -1".into(),
        ));
    }
    let bad = |msg: String| Err((ErrorCode::InvalidReplicaAssignment, msg));
    let mut seen: Vec<i32> = Vec::with_capacity(t.assignments.len());
    let mut width = None;
    for a in &t.assignments {
        let p = a.partition_index;
        if seen.contains(&p) {
            return bad(format!("partition {p} is assigned twice"));
        }
        seen.push(p);
        if let Err(msg) = replica_list(
            p,
            a.broker_ids.iter().map(|b| b.0).collect(),
            agents,
            &mut width,
        ) {
            return bad(msg);
        }
    }
    seen.sort_unstable();
    if seen.iter().enumerate().any(|(i, &p)| p != i as i32) {
        return bad("the assigned partitions must be numbered 0, 1, 2, ... without gaps".into());
    }
    Ok((seen.len() as i32, width.unwrap_or(1) as i16))
}

/// One partition's manual replica list, checked as Kafka's controller
/// checks it (CreateTopics and CreatePartitions): not empty, no agent
/// twice, only live agents, and as many replicas as the partitions before
/// it (`width`, set by the first list).
pub(super) fn replica_list(
    p: i32,
    mut ids: Vec<i32>,
    agents: &[i32],
    width: &mut Option<usize>,
) -> Result<(), String> {
    if ids.is_empty() {
        return Err(format!("partition {p} is assigned an empty replica list"));
    }
    ids.sort_unstable();
    for (i, id) in ids.iter().enumerate() {
        if !agents.contains(id) {
            return Err(format!(
                "partition {p} is assigned broker {id}, which is not a live agent"
            ));
        }
        if ids[i + 1..].first() == Some(id) {
            return Err(format!(
                "partition {p} is assigned broker {id} more than once"
            ));
        }
    }
    match *width {
        None => *width = Some(ids.len()),
        Some(m) if m != ids.len() => {
            return Err(format!(
                "partition {p} is assigned {} replica(s), the partitions before it {m}",
                ids.len()
            ))
        }
        Some(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::replica_list;

    #[test]
    fn replica_lists_are_checked_as_kafka_checks_them() {
        let agents = [1, 2, 3];
        let mut width = None;
        assert_eq!(replica_list(0, vec![1, 2], &agents, &mut width), Ok(()));
        assert_eq!(width, Some(2));
        assert_eq!(replica_list(1, vec![3, 1], &agents, &mut width), Ok(()));
        let err = |p, ids: &[i32], width: &mut Option<usize>| {
            replica_list(p, ids.to_vec(), &agents, width).unwrap_err()
        };
        assert!(
            err(2, &[1], &mut width).contains("assigned 1 replica(s), the partitions before it 2")
        );
        assert!(err(2, &[], &mut None).contains("empty replica list"));
        assert!(err(2, &[2, 2], &mut None).contains("broker 2 more than once"));
        assert!(err(2, &[4], &mut None).contains("broker 4, which is not a live agent"));
    }
}
