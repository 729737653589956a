//! ShareGroupHeartbeat (key 76, KIP-932): a member of a share group joins
//! (with a member id it made), heartbeats and leaves; the coordinator
//! answers with its epoch and the partitions it fetches from (shared with
//! other members when they outnumber the partitions).

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::access::allowed;
use super::{group_coordinator, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::groups::consumer::to_wire;
use crate::groups::share::{ShareHeartbeatArgs, ShareHeartbeatResult};
use crate::limits::SHARE_MEMBER_ID_BYTES_MAX as MEMBER_ID_BYTES_MAX;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// ShareGroupHeartbeat, version 1 (Kafka 4.1+; v0 was 4.0's early access).
pub const API: Api<ShareGroupHeartbeatRequest> = Api::new(ApiKey::ShareGroupHeartbeat, 1, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let result = heartbeat(shard, req, body).await;
    if let Some(m) = &result.error_message {
        tracing::debug!(error = ?result.error, message = %m, "share group heartbeat refused");
    }
    ShareGroupHeartbeatResponse::default()
        .with_error_code(result.error.code())
        .with_error_message(result.error_message.as_deref().map(str_bytes))
        .with_member_id(
            Some(result.member_id.as_str())
                .filter(|m| !m.is_empty())
                .map(str_bytes),
        )
        .with_member_epoch(result.member_epoch)
        .with_heartbeat_interval_ms(result.heartbeat_interval_ms)
        .with_assignment(result.assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                to_wire(&a)
                    .into_iter()
                    .map(|(t, ps)| {
                        TopicPartitions::default()
                            .with_topic_id(t)
                            .with_partitions(ps)
                    })
                    .collect(),
            )
        }))
}

async fn heartbeat(
    shard: &Shard,
    req: &Req,
    body: ShareGroupHeartbeatRequest,
) -> ShareHeartbeatResult {
    let groups = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Ok(g) => g,
        Err(e) => return ShareHeartbeatResult::error(e, None),
    };
    let invalid = |m: &str| ShareHeartbeatResult::error(ErrorCode::InvalidRequest, m.to_owned());
    if body.member_id.len() > MEMBER_ID_BYTES_MAX || body.member_id.contains('\0') {
        return invalid("MemberId must be at most 36 characters, without NUL.");
    }
    if body.rack_id.as_deref().is_some_and(str::is_empty) {
        return invalid("RackId can't be empty.");
    }
    if body.member_epoch < -1 {
        return invalid("MemberEpoch is invalid.");
    }
    if body.member_epoch == 0
        && body
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty())
    {
        return invalid("SubscribedTopicNames must be set in first request.");
    }
    // Kafka: DESCRIBE on every subscribed topic.
    let mut resolved = Vec::new();
    if let Some(names) = &body.subscribed_topic_names {
        let denied: Vec<&str> = names
            .iter()
            .map(|n| n.0.as_str())
            .filter(|n| !allowed(shard, req, op::DESCRIBE, resource::TOPIC, n))
            .collect();
        if !denied.is_empty() {
            return ShareHeartbeatResult::error(
                ErrorCode::TopicAuthorizationFailed,
                format!(
                    "The following topics are not authorized: {}",
                    denied.join(", ")
                ),
            );
        }
        for n in names {
            if let Ok(Some(t)) = shard.topics.by_name(n.0.as_str()).await {
                resolved.push((t.name, t.topic_id, t.partitions));
            }
        }
    }
    let group_id = body.group_id.to_string();
    let ms = |c: &crate::dynamic::Configs, name| {
        c.group_ms(&group_id, name)
            .map(std::time::Duration::from_millis)
    };
    let (session_timeout, heartbeat_interval) =
        shard.configs.with(&shard.agent.dynamic.copy, |c| {
            (
                ms(c, "share.session.timeout.ms"),
                ms(c, "share.heartbeat.interval.ms"),
            )
        });
    let args = ShareHeartbeatArgs {
        group_id: group_id.clone(),
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        rack_id: body.rack_id.map(|s| s.to_string()),
        subscribed_topic_names: body
            .subscribed_topic_names
            .map(|v| v.into_iter().map(|n| n.0.to_string()).collect()),
        client_id: req.client_id(),
        client_host: req.client_host(),
        session_timeout,
        heartbeat_interval,
    };
    groups.share_heartbeat(args, resolved).await
}
