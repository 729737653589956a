//! ReadShareGroupStateSummary (key 87): a share-partition's state epoch
//! and start offset (what DescribeShareGroupOffsets shows). CLUSTER_ACTION
//! on the cluster; see [`super::read_share_group_state`].

use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::{
    ApiKey, ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
};

use super::access::cluster_allowed;
use super::share_support::state_refusal;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::share::store::read;

/// ReadShareGroupStateSummary, version 0.
pub const API: Api<ReadShareGroupStateSummaryRequest> =
    Api::new(ApiKey::ReadShareGroupStateSummary, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    let authorized = cluster_allowed(shard, req, op::CLUSTER_ACTION);
    let group = body.group_id.as_str();
    let mut results = Vec::with_capacity(body.topics.len());
    for t in &body.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let base = PartitionResult::default()
                .with_partition(p.partition)
                .with_leader_epoch(-1)
                .with_start_offset(-1);
            let out = if let Some(e) = state_refusal(authorized, group) {
                base.with_error_code(e.code())
            } else {
                match read(&shard.agent.meta, group, (t.topic_id, p.partition)).await {
                    Ok(Some((epoch, start, _))) => {
                        base.with_state_epoch(epoch).with_start_offset(start)
                    }
                    Ok(None) => base.with_error_code(ErrorCode::UnknownTopicOrPartition.code()),
                    Err(e) => base.with_error_code(e.code()),
                }
            };
            partitions.push(out);
        }
        results.push(
            ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadShareGroupStateSummaryResponse::default().with_results(results)
}
