//! ElectLeaders (key 43). A rutomq partition has no replicas to elect
//! among: any agent serves it, and the agent Metadata names as its leader
//! is the only replica it lists, so its preferred replica already leads.
//! Every existing partition is answered ELECTION_NOT_NEEDED, as Kafka
//! answers a partition whose preferred (or, unclean, any live) replica
//! leads; with no partitions named, nothing needs an election and the
//! answer lists none, as Kafka's does.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse};

use super::access::allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// ElectLeaders, versions 0–2.
pub const API: Api<ElectLeadersRequest> = Api::new(ApiKey::ElectLeaders, 0, 2);

const NOT_NEEDED: &str =
    "any rutomq agent serves any partition: its one replica, the preferred one, leads already";

pub async fn handle(shard: &Shard, req: &Req, body: ElectLeadersRequest) -> ElectLeadersResponse {
    let named = body.topic_partitions.unwrap_or_default();
    // Kafka: ALTER on the cluster; each partition carries the refusal.
    let (top, refusal) = if !allowed(shard, req, op::ALTER, resource::CLUSTER, CLUSTER_NAME) {
        (
            ErrorCode::ClusterAuthorizationFailed,
            Some(ErrorCode::ClusterAuthorizationFailed),
        )
    } else if !matches!(body.election_type, 0 | 1) {
        tracing::info!(client = %req.client_id(), election_type = body.election_type,
            "ElectLeaders refused: unknown election type");
        (ErrorCode::InvalidRequest, Some(ErrorCode::InvalidRequest))
    } else {
        (ErrorCode::None, None)
    };
    let mut results = Vec::with_capacity(named.len());
    for t in named {
        let topic = match refusal {
            Some(code) => Err(code),
            None => shard.topics.by_name(t.topic.0.as_str()).await,
        };
        let partition_result = t
            .partitions
            .iter()
            .map(|&p| {
                let (code, msg) = match &topic {
                    Err(code) => (*code, None),
                    Ok(Some(rec)) if (0..rec.partitions).contains(&p) => {
                        (ErrorCode::ElectionNotNeeded, Some(NOT_NEEDED))
                    }
                    Ok(_) => (ErrorCode::UnknownTopicOrPartition, None),
                };
                PartitionResult::default()
                    .with_partition_id(p)
                    .with_error_code(code.code())
                    .with_error_message(msg.map(str_bytes))
            })
            .collect();
        results.push(
            ReplicaElectionResult::default()
                .with_topic(t.topic)
                .with_partition_result(partition_result),
        );
    }
    ElectLeadersResponse::default()
        .with_error_code(top.code())
        .with_replica_election_results(results)
}
