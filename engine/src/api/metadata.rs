//! Metadata (key 3): live agents as brokers, partition leadership spread
//! across them, and Kafka's topic auto-creation.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use rutomq_meta::{CreateTopicError, TopicRecord};
use uuid::Uuid;

use super::access::{allowed, operations, visible};
use super::{str_bytes, Api, Req};
use crate::agent::Agent;
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;
use crate::topics;

/// Metadata, versions 0–13.
pub const API: Api<MetadataRequest> = Api::new(ApiKey::Metadata, 0, 13);

pub async fn handle(shard: &Shard, req: &Req, body: MetadataRequest) -> MetadataResponse {
    let listener = req.listener_name(shard);
    let agents = listener_agents(shard, req);
    let brokers = agents
        .iter()
        .filter_map(|a| {
            let (host, port) = a.endpoint(listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(a.agent_id))
                    .with_host(str_bytes(host))
                    .with_port(port)
                    .with_rack(a.rack.as_deref().map(str_bytes)),
            )
        })
        .collect();
    // v0: an empty list means all topics; v1+: null means all.
    let all = body.topics.is_none()
        || (req.version == 0 && body.topics.as_ref().is_some_and(Vec::is_empty));
    let auto_create =
        shard.agent.cfg.auto_create_topics && (req.version < 4 || body.allow_auto_topic_creation);
    let mut topics: Vec<MetadataResponseTopic> = Vec::new();
    if all {
        match shard.agent.meta.load_topics(None).await {
            // Topics the principal may not describe are left out.
            Ok(list) => topics.extend(
                list.iter()
                    .filter(|t| visible(shard, req, op::DESCRIBE, resource::TOPIC, &t.name))
                    .map(|t| topic_entry(&agents, t)),
            ),
            Err(e) => tracing::warn!(error = %e, "metadata: cannot list topics"),
        }
    } else {
        for t in body.topics.unwrap_or_default() {
            let entry = match t.name {
                Some(name) if !allowed(shard, req, op::DESCRIBE, resource::TOPIC, &name) => {
                    error_entry(Some(name), Uuid::nil(), ErrorCode::TopicAuthorizationFailed)
                }
                Some(name) => {
                    let looked = match shard.topics.by_name(&name).await {
                        Ok(None) if auto_create && topics::valid_name(&name).is_ok() => {
                            // Kafka: creating needs CREATE on the cluster
                            // or on the topic.
                            if visible(shard, req, op::CREATE, resource::CLUSTER, CLUSTER_NAME)
                                || allowed(shard, req, op::CREATE, resource::TOPIC, &name)
                            {
                                create_auto(shard, &name).await
                            } else {
                                Err(ErrorCode::TopicAuthorizationFailed)
                            }
                        }
                        other => other,
                    };
                    match looked {
                        Ok(Some(rec)) => topic_entry(&agents, &rec),
                        Ok(None) => {
                            let code = match topics::valid_name(&name) {
                                Ok(()) => ErrorCode::UnknownTopicOrPartition,
                                Err(_) => ErrorCode::InvalidTopicException,
                            };
                            error_entry(Some(name), Uuid::nil(), code)
                        }
                        Err(code) => error_entry(Some(name), Uuid::nil(), code),
                    }
                }
                None => match shard.topics.by_id(t.topic_id).await {
                    // Topic ids are not secret: refused by id, as Kafka does.
                    Ok(Some(rec))
                        if !allowed(shard, req, op::DESCRIBE, resource::TOPIC, &rec.name) =>
                    {
                        error_entry(None, t.topic_id, ErrorCode::TopicAuthorizationFailed)
                    }
                    Ok(Some(rec)) => topic_entry(&agents, &rec),
                    Ok(None) => error_entry(None, t.topic_id, ErrorCode::UnknownTopicId),
                    Err(code) => error_entry(None, t.topic_id, code),
                },
            };
            topics.push(entry);
        }
    }
    let controller = agents
        .iter()
        .map(|a| a.agent_id)
        .min()
        .unwrap_or(shard.agent.agent_id);
    // Reported only when asked (otherwise Kafka's "not requested" value,
    // i32::MIN, stays).
    if body.include_topic_authorized_operations {
        // Kafka reports them for every topic the principal may describe,
        // also one that does not exist.
        let describable = |t: &MetadataResponseTopic| {
            t.error_code != ErrorCode::TopicAuthorizationFailed.code() && t.name.is_some()
        };
        for t in topics.iter_mut().filter(|t| describable(t)) {
            let name = t.name.as_ref().map_or("", |n| n.0.as_str());
            t.topic_authorized_operations = operations(shard, req, true, resource::TOPIC, name);
        }
    }
    let cluster_ops = operations(
        shard,
        req,
        body.include_cluster_authorized_operations,
        resource::CLUSTER,
        CLUSTER_NAME,
    );
    MetadataResponse::default()
        .with_cluster_authorized_operations(cluster_ops)
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(&shard.agent.cluster_id)))
        .with_controller_id(BrokerId(controller))
        .with_topics(topics)
}

/// The live agents clients of the request's listener can reach (any agent
/// serves any partition, so leadership is spread over those alone).
pub fn listener_agents(shard: &Shard, req: &Req) -> Vec<rutomq_meta::AgentRecord> {
    let listener = req.listener_name(shard);
    let mut agents = shard.agent.live_agents();
    agents.retain(|a| a.endpoint(listener).is_some());
    if agents.is_empty() {
        agents.push(shard.agent.me());
    }
    agents
}

/// The leader Metadata names for a partition: spread over `agents` by
/// hash, with the one epoch a rutomq partition has.
pub fn leader_of(agents: &[rutomq_meta::AgentRecord], topic_id: Uuid, partition: i32) -> BrokerId {
    BrokerId(Agent::leader_for(agents, topic_id, partition))
}

fn error_entry(name: Option<TopicName>, topic_id: Uuid, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_topic_authorized_operations(i32::MIN)
        .with_error_code(code.code())
        .with_name(name)
        .with_topic_id(topic_id)
}

fn topic_entry(agents: &[rutomq_meta::AgentRecord], t: &TopicRecord) -> MetadataResponseTopic {
    let partitions = (0..t.partitions)
        .map(|p| {
            let leader = leader_of(agents, t.topic_id, p);
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(leader)
                .with_leader_epoch(topics::LEADER_EPOCH)
                .with_replica_nodes(vec![leader])
                .with_isr_nodes(vec![leader])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_topic_authorized_operations(i32::MIN)
        .with_name(Some(TopicName(str_bytes(&t.name))))
        .with_topic_id(t.topic_id)
        .with_partitions(partitions)
}

/// Creates a topic with the default partition count (Metadata auto-create);
/// a concurrent creation by someone else is fine.
async fn create_auto(shard: &Shard, name: &str) -> Result<Option<TopicRecord>, ErrorCode> {
    let partitions = shard.agent.cfg.default_partitions;
    match shard
        .agent
        .meta
        .create_topic(name.to_owned(), partitions, Vec::new())
        .await
    {
        Ok(Ok(t)) => {
            tracing::info!(topic = name, partitions, "auto-created topic");
            Ok(Some(t))
        }
        Ok(Err(CreateTopicError::AlreadyExists)) => {
            shard.topics.forget(name);
            shard.topics.by_name(name).await
        }
        Err(e) => Err(ErrorCode::from(&e)),
    }
}
