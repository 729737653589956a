//! OffsetForLeaderEpoch (key 23): where a leader epoch's log ends, which
//! clients ask to detect truncation after a leader change. A rutomq
//! partition has a single epoch ([`LEADER_EPOCH`]) whose log ends
//! at the high watermark; nothing is ever truncated.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;
use crate::topics::LEADER_EPOCH;

/// OffsetForLeaderEpoch, versions 2–4 (Kafka 4 serves no older one).
pub const API: Api<OffsetForLeaderEpochRequest> = Api::new(ApiKey::OffsetForLeaderEpoch, 2, 4);

/// Kafka's "no such epoch" answer.
const UNDEFINED: i32 = -1;

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // A replica (replica_id >= 0) needs CLUSTER_ACTION; rutomq has none,
    // and Kafka refuses a client posing as one the same way.
    let replica = body.replica_id.0 >= 0
        && !allowed(
            shard,
            req,
            op::CLUSTER_ACTION,
            resource::CLUSTER,
            CLUSTER_NAME,
        );
    let mut topics = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        // Kafka: DESCRIBE on the topic, checked before it is known to exist.
        let topic = if replica {
            Err(ErrorCode::ClusterAuthorizationFailed)
        } else if allowed(shard, req, op::DESCRIBE, resource::TOPIC, &t.topic) {
            shard.topics.by_name(t.topic.0.as_str()).await
        } else {
            Err(ErrorCode::TopicAuthorizationFailed)
        };
        // The partitions' lookups go to PostgreSQL together (the metadata
        // thread pipelines them), not one round trip after another.
        let parts = futures::future::join_all(t.partitions.iter().map(|p| {
            let topic = &topic;
            async move {
                let answer = EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_leader_epoch(UNDEFINED)
                    .with_end_offset(-1);
                let outcome = match topic {
                    Err(code) => Err(*code),
                    Ok(Some(rec)) if (0..rec.partitions).contains(&p.partition) => {
                        let (current, epoch) = (p.current_leader_epoch, p.leader_epoch);
                        end_of(shard, rec.topic_id, p.partition, current, epoch).await
                    }
                    Ok(_) => Err(ErrorCode::UnknownTopicOrPartition),
                };
                match outcome {
                    Ok(Some(end)) => answer.with_leader_epoch(LEADER_EPOCH).with_end_offset(end),
                    Ok(None) => answer,
                    Err(code) => answer.with_error_code(code.code()),
                }
            }
        }))
        .await;
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(parts),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// The end offset of `epoch` (`None`: an epoch the partition never had),
/// after Kafka's check of the client's own view of the epoch (-1: none).
async fn end_of(
    shard: &Shard,
    topic_id: uuid::Uuid,
    partition: i32,
    current: i32,
    epoch: i32,
) -> Result<Option<i64>, ErrorCode> {
    if current >= 0 && current != LEADER_EPOCH {
        return Err(if current > LEADER_EPOCH {
            ErrorCode::UnknownLeaderEpoch
        } else {
            ErrorCode::FencedLeaderEpoch
        });
    }
    if epoch != LEADER_EPOCH {
        return Ok(None);
    }
    let offsets = shard
        .agent
        .meta
        .partition_offsets(topic_id, partition)
        .await
        .map_err(|e| ErrorCode::from(&e))?
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    Ok(Some(offsets.high_watermark))
}
