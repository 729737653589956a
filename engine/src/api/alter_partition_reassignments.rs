//! AlterPartitionReassignments (key 45): refused per partition, honestly.
//! A rutomq partition's records are in object storage and any agent
//! serves it; there are no replicas to move, so a reassignment would be a
//! success that moved nothing. Kafka's own codes say so: a new replica
//! list is INVALID_REPLICA_ASSIGNMENT (with why), a cancellation
//! NO_REASSIGNMENT_IN_PROGRESS.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey,
};

use super::access::allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// AlterPartitionReassignments, versions 0–1.
pub const API: Api<AlterPartitionReassignmentsRequest> =
    Api::new(ApiKey::AlterPartitionReassignments, 0, 1);

/// Why no reassignment is made.
pub const NO_REPLICAS: &str = "rutomq partitions have no replicas to move: records live in \
object storage and any agent serves any partition";

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(body.allow_replication_factor_change);
    // Kafka: ALTER on the cluster, for the whole request.
    if !allowed(shard, req, op::ALTER, resource::CLUSTER, CLUSTER_NAME) {
        return response.with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
    }
    let mut responses = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        let topic = shard.topics.by_name(t.name.0.as_str()).await;
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let (code, msg) = match &topic {
                    Err(code) => (*code, None),
                    Ok(Some(rec)) if (0..rec.partitions).contains(&p.partition_index) => {
                        match p.replicas {
                            None => (ErrorCode::NoReassignmentInProgress, None),
                            Some(_) => (ErrorCode::InvalidReplicaAssignment, Some(NO_REPLICAS)),
                        }
                    }
                    Ok(_) => (ErrorCode::UnknownTopicOrPartition, None),
                };
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code.code())
                    .with_error_message(msg.map(str_bytes))
            })
            .collect();
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    if responses
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code == ErrorCode::InvalidReplicaAssignment.code())
    {
        tracing::info!(client = %req.client_id(), "AlterPartitionReassignments refused: {NO_REPLICAS}");
    }
    response.with_responses(responses)
}
