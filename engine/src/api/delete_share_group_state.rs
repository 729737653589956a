//! DeleteShareGroupState (key 86): forgets share-partitions' states.
//! CLUSTER_ACTION on the cluster; see [`super::read_share_group_state`].

use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteStateResult, PartitionResult,
};
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
};

use super::access::cluster_allowed;
use super::share_support::state_refusal;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;

/// DeleteShareGroupState, version 0.
pub const API: Api<DeleteShareGroupStateRequest> = Api::new(ApiKey::DeleteShareGroupState, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let authorized = cluster_allowed(shard, req, op::CLUSTER_ACTION);
    let group = body.group_id.to_string();
    let mut results = Vec::with_capacity(body.topics.len());
    for t in &body.topics {
        let keys: Vec<(uuid::Uuid, i32)> = t
            .partitions
            .iter()
            .map(|p| (t.topic_id, p.partition))
            .collect();
        let code = if let Some(e) = state_refusal(authorized, &group) {
            e
        } else {
            match shard
                .agent
                .meta
                .share_delete_partitions(group.clone(), keys)
                .await
            {
                Ok(_) => ErrorCode::None,
                Err(e) => ErrorCode::from(&e),
            }
        };
        results.push(
            DeleteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            PartitionResult::default()
                                .with_partition(p.partition)
                                .with_error_code(code.code())
                        })
                        .collect(),
                ),
        );
    }
    DeleteShareGroupStateResponse::default().with_results(results)
}
