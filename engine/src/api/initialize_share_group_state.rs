//! InitializeShareGroupState (key 83): sets a share-partition's start
//! offset and state epoch, nothing in flight (Kafka's coordinator sends it
//! when partitions are first assigned and for AlterShareGroupOffsets);
//! start offset -1 forgets the state (it starts again from
//! share.auto.offset.reset). An older state epoch is FENCED_STATE_EPOCH.
//! CLUSTER_ACTION on the cluster; see [`super::read_share_group_state`].

use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeStateResult, PartitionResult,
};
use kafka_protocol::messages::{
    ApiKey, InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
};

use super::access::cluster_allowed;
use super::share_support::{replaced, state_refusal};
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::share::partition::SharePartition;

/// InitializeShareGroupState, version 0.
pub const API: Api<InitializeShareGroupStateRequest> =
    Api::new(ApiKey::InitializeShareGroupState, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let authorized = cluster_allowed(shard, req, op::CLUSTER_ACTION);
    let group = body.group_id.to_string();
    let mut results = Vec::with_capacity(body.topics.len());
    for t in &body.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let key = (t.topic_id, p.partition);
            let code = if let Some(e) = state_refusal(authorized, &group) {
                e
            } else if p.start_offset < -1 {
                ErrorCode::InvalidRequest
            } else if p.start_offset == -1 {
                match shard
                    .agent
                    .meta
                    .share_delete_partitions(group.clone(), vec![key])
                    .await
                {
                    Ok(_) => ErrorCode::None,
                    Err(e) => ErrorCode::from(&e),
                }
            } else {
                let state = SharePartition::new(p.start_offset);
                replaced(shard, &group, key, p.state_epoch, state).await
            };
            partitions.push(
                PartitionResult::default()
                    .with_partition(p.partition)
                    .with_error_code(code.code()),
            );
        }
        results.push(
            InitializeStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    InitializeShareGroupStateResponse::default().with_results(results)
}
