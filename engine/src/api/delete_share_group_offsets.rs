//! DeleteShareGroupOffsets (key 92, KIP-932): an empty share group forgets
//! its consumption of topics (kafka-share-groups --delete-offsets); it
//! starts again from share.auto.offset.reset when it next consumes them.

use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic as Topic;
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
};
use uuid::Uuid;

use super::share_support::{empty_share_group, named_topic};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;

/// DeleteShareGroupOffsets, version 0.
pub const API: Api<DeleteShareGroupOffsetsRequest> =
    Api::new(ApiKey::DeleteShareGroupOffsets, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let group_id = body.group_id.to_string();
    let top = |e: ErrorCode, m: &str| {
        tracing::debug!(group = %group_id, error = ?e, "share group offsets not deleted: {m}");
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(m).filter(|m| !m.is_empty()).map(str_bytes))
    };
    if let Err((e, m)) = empty_share_group(shard, req, op::DELETE, &group_id, false).await {
        return top(e, m);
    }
    let mut out = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        let name = t.topic_name.0.as_str();
        let resolved = named_topic(shard, req, op::READ, name).await;
        let denied = resolved.is_err();
        let found = resolved.ok().flatten();
        let (code, message) = match &found {
            _ if denied => (ErrorCode::TopicAuthorizationFailed, None),
            None => (ErrorCode::UnknownTopicOrPartition, None),
            Some(r) => match shard
                .agent
                .meta
                .share_delete_topics(group_id.clone(), vec![r.topic_id])
                .await
            {
                Ok(0) => (
                    ErrorCode::UnknownTopicOrPartition,
                    Some("There is no offset information to delete."),
                ),
                Ok(n) => {
                    tracing::info!(group = %group_id, topic = %name, partitions = n, "share group offsets deleted");
                    (ErrorCode::None, None)
                }
                Err(e) => (ErrorCode::from(&e), None),
            },
        };
        out.push(
            Topic::default()
                .with_topic_name(t.topic_name.clone())
                .with_topic_id(found.map_or(Uuid::nil(), |r| r.topic_id))
                .with_error_code(code.code())
                .with_error_message(message.map(str_bytes)),
        );
    }
    DeleteShareGroupOffsetsResponse::default().with_responses(out)
}
