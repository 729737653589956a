//! ShareAcknowledge (key 79, KIP-932): a share group member acknowledges
//! records it holds (accept, release, reject, gap) outside a fetch, and
//! closes its share session (epoch -1), giving back what it still holds.

use std::collections::BTreeMap;

use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareAcknowledgeRequest, ShareAcknowledgeResponse};

use super::share_support::{
    acknowledge, batches, partition_error, requester, resolve_topics, rules_of,
};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;
use crate::share::sessions::release;

/// ShareAcknowledge, version 1 (v2's lock renewal is not served).
pub const API: Api<ShareAcknowledgeRequest> = Api::new(ApiKey::ShareAcknowledge, 1, 1);

fn top_error(code: ErrorCode, message: String) -> ShareAcknowledgeResponse {
    tracing::debug!(error = ?code, %message, "share acknowledge refused");
    ShareAcknowledgeResponse::default()
        .with_error_code(code.code())
        .with_error_message(
            Some(message)
                .filter(|m| !m.is_empty())
                .map(|m| str_bytes(&m)),
        )
}

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let (group, member) = match requester(
        shard,
        req,
        body.group_id.as_ref().map(|g| g.0.as_str()),
        body.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(who) => who,
        Err((code, message)) => return top_error(code, message),
    };
    let (rules, _, _) = rules_of(shard, &group);
    let closed = match req.conn.as_ref() {
        None => Err((ErrorCode::ShareSessionNotFound, String::new())),
        Some(c) => c
            .share_sessions
            .borrow_mut()
            .ack_step((group.clone(), member.clone()), body.share_session_epoch),
    };
    let closed = match closed {
        Ok(c) => c,
        Err((code, message)) => return top_error(code, message),
    };
    let topics = resolve_topics(shard, req, body.topics.iter().map(|t| t.topic_id)).await;
    let mut out: BTreeMap<uuid::Uuid, Vec<PartitionData>> = BTreeMap::new();
    for t in &body.topics {
        for p in &t.partitions {
            let key = (t.topic_id, p.partition_index);
            let wire = p
                .acknowledgement_batches
                .iter()
                .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types));
            let (code, message) = match (partition_error(&topics, key), batches(wire)) {
                (Some(e), _) => (e, None),
                (None, Err((code, message))) => (code, Some(message)),
                (None, Ok(b)) => acknowledge(shard, &group, &member, key, &b, &rules).await,
            };
            out.entry(t.topic_id).or_default().push(
                PartitionData::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code.code())
                    .with_error_message(message.map(|m| str_bytes(&m))),
            );
        }
    }
    if let Some(keys) = closed {
        release(&shard.agent.meta, &group, &member, &keys, &rules).await;
    }
    ShareAcknowledgeResponse::default().with_responses(
        out.into_iter()
            .map(|(topic_id, partitions)| {
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions)
            })
            .collect(),
    )
}
