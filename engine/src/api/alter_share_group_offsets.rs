//! AlterShareGroupOffsets (key 91, KIP-932): sets where an empty share
//! group's consumption of partitions starts (kafka-share-groups
//! --reset-offsets); what was in flight there is forgotten. A group that
//! does not exist is made (empty), as Kafka does.

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition as Partition,
    AlterShareGroupOffsetsResponseTopic as Topic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey,
};
use uuid::Uuid;

use super::share_support::{empty_share_group, named_topic};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::share::store::{set_start, Changed};

/// AlterShareGroupOffsets, version 0.
pub const API: Api<AlterShareGroupOffsetsRequest> = Api::new(ApiKey::AlterShareGroupOffsets, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let group_id = body.group_id.to_string();
    let top = |e: ErrorCode, m: &str| {
        tracing::debug!(group = %group_id, error = ?e, "share group offsets not altered: {m}");
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(m).filter(|m| !m.is_empty()).map(str_bytes))
    };
    if let Err((e, m)) = empty_share_group(shard, req, op::READ, &group_id, true).await {
        return top(e, m);
    }
    let mut out = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        let name = t.topic_name.0.as_str();
        let resolved = named_topic(shard, req, op::READ, name).await;
        let denied = resolved.is_err();
        let found = resolved.ok().flatten();
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let (code, message) = match &found {
                _ if denied => (ErrorCode::TopicAuthorizationFailed, None),
                None => (ErrorCode::UnknownTopicOrPartition, None),
                Some(r) if p.partition_index < 0 || p.partition_index >= r.partitions => {
                    (ErrorCode::UnknownTopicOrPartition, None)
                }
                Some(_) if p.start_offset < 0 => (
                    ErrorCode::InvalidRequest,
                    Some(format!("start offset {} is negative", p.start_offset)),
                ),
                Some(r) => {
                    let key = (r.topic_id, p.partition_index);
                    match set_start(&shard.agent.meta, &group_id, key, p.start_offset).await {
                        Ok(Changed::Done(())) => {
                            tracing::info!(group = %group_id, topic = %name, partition = p.partition_index,
                                start = p.start_offset, "share group start offset set");
                            (ErrorCode::None, None)
                        }
                        Ok(Changed::NoPartition) => (ErrorCode::UnknownTopicOrPartition, None),
                        Ok(Changed::NoGroup) => (ErrorCode::GroupIdNotFound, None),
                        Ok(_) => (
                            ErrorCode::CoordinatorLoadInProgress,
                            Some("the share-partition kept changing; try again".into()),
                        ),
                        Err(e) => (e, None),
                    }
                }
            };
            partitions.push(
                Partition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code.code())
                    .with_error_message(message.map(|m| str_bytes(&m))),
            );
        }
        out.push(
            Topic::default()
                .with_topic_name(t.topic_name.clone())
                .with_topic_id(found.map_or(Uuid::nil(), |r| r.topic_id))
                .with_partitions(partitions),
        );
    }
    AlterShareGroupOffsetsResponse::default().with_responses(out)
}
