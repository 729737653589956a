//! ConsumerGroupHeartbeat (key 68, KIP-848): a member of a consumer group
//! joins, heartbeats, acknowledges revocations and leaves; the coordinator
//! answers with its epoch and the partitions it may own.

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};

use super::access::allowed;
use super::{group_coordinator, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::groups::consumer::{from_wire, to_wire, HeartbeatArgs, HeartbeatResult};
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// ConsumerGroupHeartbeat, versions 0–1.
pub const API: Api<ConsumerGroupHeartbeatRequest> = Api::new(ApiKey::ConsumerGroupHeartbeat, 0, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let result = heartbeat(shard, req, body).await;
    if let Some(m) = &result.error_message {
        tracing::debug!(error = ?result.error, message = %m, "consumer group heartbeat refused");
    }
    ConsumerGroupHeartbeatResponse::default()
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
    body: ConsumerGroupHeartbeatRequest,
) -> HeartbeatResult {
    let groups = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Ok(g) => g,
        Err(e) => return HeartbeatResult::error(e, None),
    };
    // Stored as PostgreSQL text, which cannot hold NUL.
    if body.member_id.contains('\0')
        || body
            .instance_id
            .as_deref()
            .is_some_and(|i| i.contains('\0'))
    {
        return HeartbeatResult::error(
            ErrorCode::InvalidRequest,
            "member and instance ids cannot hold NUL".to_owned(),
        );
    }
    // Kafka: DESCRIBE on every subscribed topic.
    if let Some(names) = &body.subscribed_topic_names {
        let denied: Vec<&str> = names
            .iter()
            .map(|n| n.0.as_str())
            .filter(|n| !allowed(shard, req, op::DESCRIBE, resource::TOPIC, n))
            .collect();
        if !denied.is_empty() {
            return HeartbeatResult::error(
                ErrorCode::TopicAuthorizationFailed,
                format!(
                    "The following topics are not authorized: {}",
                    denied.join(", ")
                ),
            );
        }
    }
    // The subscribed topics' ids and partition counts, as known now.
    let mut resolved = Vec::new();
    if let Some(names) = &body.subscribed_topic_names {
        for n in names {
            if let Ok(Some(t)) = shard.topics.by_name(n.0.as_str()).await {
                resolved.push((t.name, t.topic_id, t.partitions));
            }
        }
    }
    // The group's own timing, when its group configs set it.
    let group_id = body.group_id.to_string();
    let ms = |c: &crate::dynamic::Configs, name| {
        c.group_ms(&group_id, name)
            .map(std::time::Duration::from_millis)
    };
    let (session_timeout, heartbeat_interval) =
        shard.configs.with(&shard.agent.dynamic.copy, |c| {
            (
                ms(c, "consumer.session.timeout.ms"),
                ms(c, "consumer.heartbeat.interval.ms"),
            )
        });
    let args = HeartbeatArgs {
        group_id: body.group_id.to_string(),
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        instance_id: body.instance_id.map(|s| s.to_string()),
        rack_id: body.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        subscribed_topic_names: body
            .subscribed_topic_names
            .map(|v| v.into_iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: body.subscribed_topic_regex.map(|r| r.to_string()),
        server_assignor: body.server_assignor.map(|s| s.to_string()),
        owned: body
            .topic_partitions
            .map(|v| from_wire(v.into_iter().map(|t| (t.topic_id, t.partitions)))),
        client_id: req.client_id(),
        client_host: req.client_host(),
        principal: req.with_principal(|p, h| (p.to_owned(), h.to_owned())),
        version: req.version,
        session_timeout,
        heartbeat_interval,
    };
    groups.consumer_heartbeat(args, resolved).await
}
