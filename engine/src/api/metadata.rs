//! Metadata (key 3): live agents as brokers, partition leadership spread
//! across them, and Kafka's topic auto-creation.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use rutomq_meta::TopicRecord;
use uuid::Uuid;

use super::{Api, str_bytes, Req};
use crate::agent::Agent;
use crate::error::ErrorCode;
use crate::shard::Shard;
use crate::topics;

/// Kafka's AclOperation codes as bits: READ 3, WRITE 4, CREATE 5, DELETE 6,
/// ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
const TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
/// ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

/// Metadata, versions 0–13.
pub const API: Api<MetadataRequest> = Api::new(ApiKey::Metadata, 0, 13);

pub async fn handle(shard: &Shard, req: &Req, body: MetadataRequest) -> MetadataResponse {
    // The agents as clients of this listener reach them (any agent serves
    // any partition, so leadership is spread over those alone).
    let listener = req.listener_name(shard);
    let mut agents = shard.agent.live_agents();
    agents.retain(|a| a.endpoint(listener).is_some());
    if agents.is_empty() {
        agents.push(shard.agent.me());
    }
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
            Ok(list) => topics.extend(list.iter().map(|t| topic_entry(&agents, t))),
            Err(e) => tracing::warn!(error = %e, "metadata: cannot list topics"),
        }
    } else {
        for t in body.topics.unwrap_or_default() {
            let entry = match t.name {
                Some(name) => {
                    let looked = match shard.topics.by_name(&name).await {
                        Ok(None) if auto_create && topics::valid_name(&name).is_ok() => {
                            topics::auto_create(shard, &name).await
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
    // No authorizer yet: every operation is allowed. Reported only when asked
    // (otherwise Kafka's "not requested" value, i32::MIN, stays).
    if body.include_topic_authorized_operations {
        for t in topics.iter_mut().filter(|t| t.error_code == 0) {
            t.topic_authorized_operations = TOPIC_OPERATIONS;
        }
    }
    let cluster_ops = if body.include_cluster_authorized_operations {
        CLUSTER_OPERATIONS
    } else {
        i32::MIN
    };
    MetadataResponse::default()
        .with_cluster_authorized_operations(cluster_ops)
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(&shard.agent.cluster_id)))
        .with_controller_id(BrokerId(controller))
        .with_topics(topics)
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
            let leader = BrokerId(Agent::leader_for(agents, t.topic_id, p));
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(leader)
                .with_leader_epoch(0)
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
