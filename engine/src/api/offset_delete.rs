//! OffsetDelete (key 47): removes committed offsets of partitions a group
//! does not consume (all of them when the group is empty).

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};

use super::access::allowed;
use super::{group_coordinator, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// OffsetDelete, versions 0–0.
pub const API: Api<OffsetDeleteRequest> = Api::new(ApiKey::OffsetDelete, 0, 0);

pub async fn handle(shard: &Shard, req: &Req, body: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let groups = match group_coordinator(shard, req, op::DELETE, &body.group_id) {
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
        Ok(g) => g,
    };
    // (topic index, partition, error known now)
    let mut answers: Vec<(usize, i32, Option<ErrorCode>)> = Vec::new();
    let mut known = Vec::new();
    for (ti, t) in body.topics.iter().enumerate() {
        // Kafka: READ on each topic.
        let topic = if allowed(shard, req, op::READ, resource::TOPIC, &t.name) {
            shard.topics.by_name(t.name.0.as_str()).await
        } else {
            Err(ErrorCode::TopicAuthorizationFailed)
        };
        for p in &t.partitions {
            let i = p.partition_index;
            match &topic {
                Ok(Some(rec)) if i >= 0 && i < rec.partitions => {
                    known.push((t.name.0.to_string(), rec.topic_id, i));
                    answers.push((ti, i, None));
                }
                Err(e) => answers.push((ti, i, Some(*e))),
                _ => answers.push((ti, i, Some(ErrorCode::UnknownTopicOrPartition))),
            }
        }
    }
    let mut codes = match groups
        .delete_offsets(body.group_id.to_string(), known)
        .await
    {
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
        Ok(c) => c.into_iter(),
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = body
        .topics
        .iter()
        .map(|t| OffsetDeleteResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (ti, partition, code) in answers {
        let code = code.unwrap_or_else(|| codes.next().unwrap_or(ErrorCode::UnknownServerError));
        topics[ti].partitions.push(
            OffsetDeleteResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code.code()),
        );
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
