//! ReadShareGroupState (key 84): a share-partition's state as Kafka's
//! share coordinator keeps it (state epoch, start offset, delivery states
//! and counts). Brokers send it to their share coordinator; in rutomq the
//! state is in PostgreSQL and agents read it directly, so this serves
//! tools and other readers. CLUSTER_ACTION on the cluster.

use kafka_protocol::messages::read_share_group_state_response::{
    PartitionResult, ReadStateResult, StateBatch,
};
use kafka_protocol::messages::{ApiKey, ReadShareGroupStateRequest, ReadShareGroupStateResponse};

use super::access::cluster_allowed;
use super::share_support::state_refusal;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::share::store::read;

/// ReadShareGroupState, version 0.
pub const API: Api<ReadShareGroupStateRequest> = Api::new(ApiKey::ReadShareGroupState, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let authorized = cluster_allowed(shard, req, op::CLUSTER_ACTION);
    let group = body.group_id.as_str();
    let mut results = Vec::with_capacity(body.topics.len());
    for t in &body.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let base = PartitionResult::default()
                .with_partition(p.partition)
                .with_start_offset(-1);
            let out = if let Some(e) = state_refusal(authorized, group) {
                base.with_error_code(e.code())
            } else {
                match read(&shard.agent.meta, group, (t.topic_id, p.partition)).await {
                    Ok(Some((epoch, start, batches))) => base
                        .with_state_epoch(epoch)
                        .with_start_offset(start)
                        .with_state_batches(
                            batches
                                .into_iter()
                                .map(|(first, last, state, count)| {
                                    StateBatch::default()
                                        .with_first_offset(first)
                                        .with_last_offset(last)
                                        .with_delivery_state(state)
                                        .with_delivery_count(count)
                                })
                                .collect(),
                        ),
                    Ok(None) => base.with_error_code(ErrorCode::UnknownTopicOrPartition.code()),
                    Err(e) => base.with_error_code(e.code()),
                }
            };
            partitions.push(out);
        }
        results.push(
            ReadStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadShareGroupStateResponse::default().with_results(results)
}
