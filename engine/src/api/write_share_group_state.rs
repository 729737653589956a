//! WriteShareGroupState (key 85): replaces a share-partition's state with
//! Kafka's persisted form (start offset, delivery states and counts); an
//! older state epoch is FENCED_STATE_EPOCH. CLUSTER_ACTION on the
//! cluster; see [`super::read_share_group_state`].

use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult, WriteStateResult,
};
use kafka_protocol::messages::{ApiKey, WriteShareGroupStateRequest, WriteShareGroupStateResponse};

use super::access::cluster_allowed;
use super::share_support::{replaced, state_refusal};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::share::partition::SharePartition;

/// WriteShareGroupState, version 0 (v1 adds the delivery-complete count).
pub const API: Api<WriteShareGroupStateRequest> = Api::new(ApiKey::WriteShareGroupState, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let authorized = cluster_allowed(shard, req, op::CLUSTER_ACTION);
    let group = body.group_id.to_string();
    let mut results = Vec::with_capacity(body.topics.len());
    for t in &body.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let batches: Vec<(i64, i64, i8, i16)> = p
                .state_batches
                .iter()
                .map(|b| {
                    (
                        b.first_offset,
                        b.last_offset,
                        b.delivery_state,
                        b.delivery_count,
                    )
                })
                .collect();
            let (code, message) = if let Some(e) = state_refusal(authorized, &group) {
                (e, None)
            } else if p.start_offset < 0 {
                (
                    ErrorCode::InvalidRequest,
                    Some("a start offset is needed".to_owned()),
                )
            } else {
                match SharePartition::from_state_batches(p.start_offset, &batches) {
                    Err(m) => (ErrorCode::InvalidRequest, Some(m)),
                    Ok(state) => (
                        replaced(
                            shard,
                            &group,
                            (t.topic_id, p.partition),
                            p.state_epoch,
                            state,
                        )
                        .await,
                        None,
                    ),
                }
            };
            partitions.push(
                PartitionResult::default()
                    .with_partition(p.partition)
                    .with_error_code(code.code())
                    .with_error_message(message.map(|m| str_bytes(&m))),
            );
        }
        results.push(
            WriteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    WriteShareGroupStateResponse::default().with_results(results)
}
