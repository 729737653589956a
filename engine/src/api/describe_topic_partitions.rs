//! DescribeTopicPartitions (key 75, KIP-966): Metadata's topic part, paged
//! by a cursor, which Java's Admin `describeTopics` asks first. Partitions
//! are led as Metadata says; rutomq has no replicas that could fall out of
//! sync, so the eligible-leader lists are empty and nothing is offline.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use rutomq_meta::{AgentRecord, TopicRecord};
use uuid::Uuid;

use super::access::{allowed, operations, visible};
use super::metadata::{leader_of, listener_agents};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::limits::DESCRIBE_TOPIC_PARTITIONS_MAX;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::topics::LEADER_EPOCH;

/// DescribeTopicPartitions, version 0.
pub const API: Api<DescribeTopicPartitionsRequest> =
    Api::new(ApiKey::DescribeTopicPartitions, 0, 0);

/// A topic to answer for: found, or the error its entry carries.
type Described = (String, Result<TopicRecord, ErrorCode>);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let all = body.topics.is_empty();
    let mut named: Vec<String> = body.topics.iter().map(|t| t.name.0.to_string()).collect();
    named.sort_unstable();
    named.dedup();
    // Kafka: a cursor must name a requested topic and a partition >= 0.
    if let Some(c) = &body.cursor {
        let why = if c.partition_index < 0 {
            Some("the cursor's partition index must not be negative")
        } else if !all && !named.iter().any(|n| n == c.topic_name.as_str()) {
            Some("the cursor's topic must be among the topics asked for")
        } else {
            None
        };
        if let Some(why) = why {
            tracing::info!(client = %req.client_id(), "DescribeTopicPartitions refused: {why}");
            let topics = named
                .into_iter()
                .map(|n| error_entry(&n, ErrorCode::InvalidRequest))
                .collect();
            return DescribeTopicPartitionsResponse::default().with_topics(topics);
        }
    }
    let from_topic = body.cursor.as_ref().map(|c| c.topic_name.0.to_string());
    let mut wanted: Vec<Described> = Vec::new();
    if all {
        match shard.agent.meta.load_topics(None).await {
            // Topics the principal may not describe are left out.
            Ok(list) => wanted.extend(
                list.into_iter()
                    .filter(|t| visible(shard, req, op::DESCRIBE, resource::TOPIC, &t.name))
                    .map(|t| (t.name.clone(), Ok(t))),
            ),
            Err(e) => tracing::warn!(error = %e, "DescribeTopicPartitions: cannot list topics"),
        }
        wanted.sort_by(|a, b| a.0.cmp(&b.0));
    } else {
        for name in named {
            let found = if !allowed(shard, req, op::DESCRIBE, resource::TOPIC, &name) {
                Err(ErrorCode::TopicAuthorizationFailed)
            } else {
                match shard.topics.by_name(&name).await {
                    Ok(Some(t)) => Ok(t),
                    Ok(None) => Err(ErrorCode::UnknownTopicOrPartition),
                    Err(code) => Err(code),
                }
            };
            wanted.push((name, found));
        }
    }
    if let Some(from) = &from_topic {
        wanted.retain(|(n, _)| n >= from);
    }
    let limit = match body.response_partition_limit {
        n if n <= 0 => DESCRIBE_TOPIC_PARTITIONS_MAX,
        n => n.min(DESCRIBE_TOPIC_PARTITIONS_MAX),
    };
    let agents = listener_agents(shard, req);
    let mut left = limit;
    let mut topics = Vec::with_capacity(wanted.len());
    let mut next_cursor = None;
    for (name, found) in wanted {
        let t = match found {
            Ok(t) => t,
            Err(code) => {
                topics.push(error_entry(&name, code));
                continue;
            }
        };
        let start = match &body.cursor {
            Some(c) if c.topic_name.as_str() == name => c.partition_index.min(t.partitions),
            _ => 0,
        };
        if left == 0 {
            next_cursor = Some(cursor(&name, start));
            break;
        }
        let end = t.partitions.min(start.saturating_add(left));
        left -= end - start;
        let ops = operations(shard, req, true, resource::TOPIC, &name);
        topics.push(topic_entry(&agents, &t, start..end, ops));
        if end < t.partitions {
            next_cursor = Some(cursor(&name, end));
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(TopicName(str_bytes(topic)))
        .with_partition_index(partition)
}

fn error_entry(name: &str, code: ErrorCode) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code.code())
        .with_name(Some(TopicName(str_bytes(name))))
        .with_topic_id(Uuid::nil())
        .with_topic_authorized_operations(i32::MIN)
}

fn topic_entry(
    agents: &[AgentRecord],
    t: &TopicRecord,
    partitions: std::ops::Range<i32>,
    ops: i32,
) -> DescribeTopicPartitionsResponseTopic {
    let partitions = partitions
        .map(|p| {
            let leader = leader_of(agents, t.topic_id, p);
            DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(leader)
                .with_leader_epoch(LEADER_EPOCH)
                .with_replica_nodes(vec![leader])
                .with_isr_nodes(vec![leader])
                .with_eligible_leader_replicas(Some(Vec::new()))
                .with_last_known_elr(Some(Vec::new()))
        })
        .collect();
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(&t.name))))
        .with_topic_id(t.topic_id)
        .with_partitions(partitions)
        .with_topic_authorized_operations(ops)
}
