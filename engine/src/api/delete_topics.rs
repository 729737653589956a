//! DeleteTopics (key 20): by name, or by topic id (v6).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;

use super::access::allowed;
use super::throttle::Mutations;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// DeleteTopics, versions 1–6.
pub const API: Api<DeleteTopicsRequest> = Api::new(ApiKey::DeleteTopics, 1, 6);

pub async fn handle(shard: &Shard, req: &Req, body: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut targets: Vec<(Option<TopicName>, Uuid)> = body
        .topic_names
        .into_iter()
        .map(|n| (Some(n), Uuid::nil()))
        .collect();
    targets.extend(body.topics.into_iter().map(|t| (t.name, t.topic_id)));
    let mut out = Vec::new();
    // Kafka: strict from version 5.
    let mut mutations = Mutations::new(req, req.version >= 5);
    for (name, id) in targets {
        let resolved = match &name {
            Some(n) => Ok(Some(n.0.as_str().to_owned())),
            None => shard.topics.by_id(id).await.map(|t| t.map(|t| t.name)),
        };
        let result = DeletableTopicResult::default()
            .with_name(name.clone())
            .with_error_message(None)
            .with_topic_id(id);
        let result = match resolved {
            // Kafka: DELETE on the topic (refused before it is known to
            // exist, when named).
            Ok(Some(n)) if !allowed(shard, req, op::DELETE, resource::TOPIC, &n) => {
                result.with_error_code(ErrorCode::TopicAuthorizationFailed.code())
            }
            Ok(Some(n)) => match admit(shard, &mut mutations, &n).await {
                Err(code) => result.with_error_code(code.code()),
                Ok(()) => match shard.agent.meta.delete_topic(n.clone()).await {
                    Ok(Some(topic_id)) => {
                        shard.topics.forget(&n);
                        tracing::info!(topic = n, "deleted topic");
                        result
                            .with_topic_id(topic_id)
                            .with_name(Some(TopicName(str_bytes(&n))))
                    }
                    Ok(None) => result.with_error_code(ErrorCode::UnknownTopicOrPartition.code()),
                    Err(e) => result
                        .with_error_code(ErrorCode::from(&e).code())
                        .with_error_message(Some(str_bytes(&e.to_string()))),
                },
            },
            Ok(None) => result.with_error_code(ErrorCode::UnknownTopicId.code()),
            Err(code) => result.with_error_code(code.code()),
        };
        out.push(result);
    }
    drop(mutations);
    DeleteTopicsResponse::default().with_responses(out)
}

/// Counts the partitions deleting topic `name` removes, when a mutation
/// quota applies (none when it is not known here: the delete then finds
/// nothing).
async fn admit(shard: &Shard, mutations: &mut Mutations<'_>, name: &str) -> Result<(), ErrorCode> {
    if !mutations.applies() {
        return Ok(());
    }
    match shard.topics.by_name(name).await {
        Ok(Some(topic)) => mutations.admit(topic.partitions),
        _ => Ok(()),
    }
}
