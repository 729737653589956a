//! CreatePartitions (key 37): grow a topic.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};

use super::access::allowed;
use super::create_topics::replica_list;
use super::throttle::Mutations;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::limits::PARTITIONS_MAX;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

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
        // The partitions the topic has now (unknown here: left to the
        // refusal below); what a manual assignment and the mutation quota
        // are measured against.
        let current = match shard.topics.by_name(&name).await {
            Ok(Some(topic)) => Some(topic.partitions),
            _ => None,
        };
        if let Some(assignments) = &t.assignments {
            // A manual assignment places nothing (any agent serves any
            // partition) but is checked as Kafka checks one; an empty list
            // is one (Kafka 4.4.0 refuses it: "... but only 0 assignment(s)
            // were specified"), only null means none.
            let agents = shard.agent.live_agent_ids();
            if let Err(msg) = check_assignments(current, t.count, assignments, &agents) {
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
            if let Err(code) = mutations.admit(t.count - current.unwrap_or(t.count)) {
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
/// here (`current` None), or a count that does not grow it, is left to
/// the refusals after.
fn check_assignments(
    current: Option<i32>,
    count: i32,
    assignments: &[CreatePartitionsAssignment],
    agents: &[i32],
) -> Result<(), String> {
    let Some(current) = current.filter(|&c| count > c) else {
        return Ok(());
    };
    let added = (count - current) as usize;
    if assignments.len() != added {
        return Err(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        ));
    }
    let mut width = None;
    for (p, a) in (current..).zip(assignments) {
        replica_list(
            p,
            a.broker_ids.iter().map(|b| b.0).collect(),
            agents,
            &mut width,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::BrokerId;

    use super::*;

    fn lists(lists: &[&[i32]]) -> Vec<CreatePartitionsAssignment> {
        lists
            .iter()
            .map(|l| {
                CreatePartitionsAssignment::default()
                    .with_broker_ids(l.iter().map(|&b| BrokerId(b)).collect())
            })
            .collect()
    }

    #[test]
    fn one_list_per_added_partition_each_checked() {
        let agents = [1, 2];
        assert_eq!(
            check_assignments(Some(2), 4, &lists(&[&[1], &[2]]), &agents),
            Ok(())
        );
        assert_eq!(
            check_assignments(Some(2), 4, &lists(&[&[1]]), &agents).unwrap_err(),
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
        );
        assert_eq!(
            check_assignments(Some(2), 4, &[], &agents).unwrap_err(),
            "Attempted to add 2 additional partition(s), but only 0 assignment(s) were specified."
        );
        let err = check_assignments(Some(2), 4, &lists(&[&[1], &[3]]), &agents).unwrap_err();
        assert!(err.contains("partition 3 is assigned broker 3"), "{err}");
        // Unknown topic, or a count that does not grow it: refused later.
        assert_eq!(check_assignments(None, 4, &lists(&[&[9]]), &agents), Ok(()));
        assert_eq!(
            check_assignments(Some(4), 4, &lists(&[&[9]]), &agents),
            Ok(())
        );
    }
}
