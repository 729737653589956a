//! CreatePartitions (key 37): grow a topic.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};

use super::access::allowed;
use super::create_topics::replica_list;
use super::throttle::Mutations;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::limits::PARTITIONS_MAX;

/// CreatePartitions, versions 0–3.
pub const API: Api<CreatePartitionsRequest> = Api::new(ApiKey::CreatePartitions, 0, 3);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::new();
    // Kafka: strict from version 3.
    let mut mutations = Mutations::new(req, req.version >= 3);
    for t in body.topics {
        let name = t.name.0.as_str().to_owned();
        let r = CreatePartitionsTopicResult::default()
            .with_name(t.name.clone())
            .with_error_message(None);
        let fail = |code: ErrorCode, msg: String| {
            r.clone()
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&msg)))
        };
        if !allowed(shard, req, op::ALTER, resource::TOPIC, &name) {
            results.push(fail(
                ErrorCode::TopicAuthorizationFailed,
                "Authorization failed.".into(),
            ));
            continue;
        }
        if let Some(assignments) = t.assignments.as_ref().filter(|a| !a.is_empty()) {
            // A manual assignment places nothing (any agent serves any
            // partition) but is checked as Kafka checks one.
            if let Err(msg) = check_assignments(shard, &name, t.count, assignments).await {
                tracing::info!(topic = %name, reason = %msg, "CreatePartitions refused a replica assignment");
                results.push(fail(ErrorCode::InvalidReplicaAssignment, msg));
                continue;
            }
        }
        if t.count > PARTITIONS_MAX {
            results.push(fail(
                ErrorCode::InvalidPartitions,
                format!("at most {PARTITIONS_MAX} partitions"),
            ));
            continue;
        }
        if !body.validate_only && mutations.applies() {
            // The partitions it adds (a topic unknown here, or not grown,
            // is refused below and adds none).
            let current = match shard.topics.by_name(&name).await {
                Ok(Some(topic)) => topic.partitions,
                _ => t.count,
            };
            if let Err(code) = mutations.admit(t.count - current) {
                results.push(r.with_error_code(code.code()));
                continue;
            }
        }
        results.push(
            match shard
                .agent
                .meta
                .create_partitions(name.clone(), t.count, body.validate_only)
                .await
            {
                Ok(Ok(Some(_))) => {
                    shard.topics.forget(&name);
                    r
                }
                Ok(Ok(None)) => fail(
                    ErrorCode::UnknownTopicOrPartition,
                    format!("topic {name:?} does not exist"),
                ),
                Ok(Err(current)) => fail(
                    ErrorCode::InvalidPartitions,
                    format!(
                        "topic has {current} partitions; the new count {} must be larger",
                        t.count
                    ),
                ),
                Err(e) => fail(ErrorCode::from(&e), e.to_string()),
            },
        );
    }
    drop(mutations);
    CreatePartitionsResponse::default().with_results(results)
}

/// The new partitions' replica lists, one per partition added, each
/// checked as CreateTopics checks a manual assignment. A topic unknown
/// here, or a count that does not grow it, is left to the refusals after.
async fn check_assignments(
    shard: &Shard,
    name: &str,
    count: i32,
    assignments: &[CreatePartitionsAssignment],
) -> Result<(), String> {
    let current = match shard.topics.by_name(name).await {
        Ok(Some(topic)) => topic.partitions,
        _ => return Ok(()),
    };
    if count <= current {
        return Ok(());
    }
    let added = (count - current) as usize;
    if assignments.len() != added {
        return Err(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        ));
    }
    let agents: Vec<i32> = shard.agent.live_agents().iter().map(|a| a.agent_id).collect();
    let mut width = None;
    for (p, a) in (current..).zip(assignments) {
        let ids: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
        replica_list(p, &ids, &agents, &mut width)?;
    }
    Ok(())
}
