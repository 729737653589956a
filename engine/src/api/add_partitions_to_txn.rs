//! AddPartitionsToTxn (key 24), client versions 0–3: the partitions a
//! transaction will write, before its producer sends to them. Versions 4+
//! are Kafka's broker-to-coordinator verification, which rutomq does inside
//! the window commit instead (see `rutomq_meta::commit`).

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};
use uuid::Uuid;

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::txns::{self, AddTo};

/// AddPartitionsToTxn, versions 0–3.
pub const API: Api<AddPartitionsToTxnRequest> = Api::new(ApiKey::AddPartitionsToTxn, 0, 3);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let id = body.v3_and_below_transactional_id.0.to_string();
    // Every partition's answer; None until the coordinator decided.
    let mut answers: Vec<(usize, i32, Option<ErrorCode>)> = Vec::new();
    let mut wanted: Vec<(Uuid, i32)> = Vec::new();
    let mut unknown = false;
    // Kafka: WRITE on the transactional id (else every partition is
    // refused) and on each topic (the others are then not attempted).
    let txn_allowed = allowed(shard, req, op::WRITE, resource::TRANSACTIONAL_ID, &id);
    for (ti, t) in body.v3_and_below_topics.iter().enumerate() {
        let topic = if !txn_allowed {
            Err(ErrorCode::TransactionalIdAuthorizationFailed)
        } else if allowed(shard, req, op::WRITE, resource::TOPIC, &t.name) {
            shard.topics.by_name(t.name.0.as_str()).await
        } else {
            Err(ErrorCode::TopicAuthorizationFailed)
        };
        for &p in &t.partitions {
            match &topic {
                Ok(Some(rec)) if p >= 0 && p < rec.partitions => {
                    wanted.push((rec.topic_id, p));
                    answers.push((ti, p, None));
                }
                Err(e) => {
                    unknown = true;
                    answers.push((ti, p, Some(*e)));
                }
                _ => {
                    unknown = true;
                    answers.push((ti, p, Some(ErrorCode::UnknownTopicOrPartition)));
                }
            }
        }
    }
    let code = if unknown {
        // Kafka adds nothing when one partition is unknown.
        ErrorCode::OperationNotAttempted
    } else {
        wanted.sort_unstable();
        wanted.dedup();
        let (pid, epoch) = (
            body.v3_and_below_producer_id.0,
            body.v3_and_below_producer_epoch,
        );
        let add = AddTo::Partitions(wanted);
        let changed = txns::coordinated(
            &shard.agent,
            &id,
            false,
            false,
            "AddPartitionsToTxn",
            move |found| txns::add_to_txn(pid, epoch, &add, found),
        );
        txns::fenced_for(changed.await.unwrap_or_else(|e| e), req.version, 2)
    };
    if code != ErrorCode::None && code != ErrorCode::OperationNotAttempted {
        shard.agent.txn_stats.count(&shard.agent.txn_stats.refused);
        tracing::debug!(transactional_id = %id.escape_debug(), ?code, "AddPartitionsToTxn refused");
    }
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = body
        .v3_and_below_topics
        .iter()
        .map(|t| AddPartitionsToTxnTopicResult::default().with_name(t.name.clone()))
        .collect();
    for (ti, p, own) in answers {
        topics[ti].results_by_partition.push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(p)
                .with_partition_error_code(own.unwrap_or(code).code()),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}
