//! DescribeLogDirs (key 35): one virtual log directory per agent, the
//! object store (its URL without credentials), holding the partitions
//! Metadata names the agent leader of, each with the bytes its records
//! take in object storage. Asked of every agent (as Kafka's tools ask
//! every broker), the answers list each partition once. The volume's
//! total and usable bytes are unknown (-1): an object store has no fixed
//! capacity.

use std::collections::HashMap;

use kafka_protocol::messages::{ApiKey, TopicName};
use rutomq_meta::TopicRecord;

use super::access::{allowed, visible};
use super::generated::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use super::generated::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use super::metadata::{leader_of, listener_agents};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// A topic asked about, and its partitions asked about (`None`: all).
type Asked = (TopicRecord, Option<Vec<i32>>);

/// DescribeLogDirs, versions 1–5 (5 adds IsCordoned, KIP-1066: the object
/// store is never cordoned; codec generated from Kafka 4.3's spec).
pub const API: Api<DescribeLogDirsRequest> = Api::new(ApiKey::DescribeLogDirs, 1, 5);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // Kafka: DESCRIBE on the cluster; refused with no directories.
    if !allowed(shard, req, op::DESCRIBE, resource::CLUSTER, CLUSTER_NAME) {
        return DescribeLogDirsResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
    }
    let code = |e: rutomq_meta::MetaError| ErrorCode::from(&e);
    let asked: Result<Vec<Asked>, ErrorCode> = match body.topics {
        None => shard
            .agent
            .meta
            .load_topics(None)
            .await
            .map(|all| all.into_iter().map(|t| (t, None)).collect())
            .map_err(code),
        Some(list) => {
            // The partitions asked for, by topic (a topic may be named twice).
            let mut parts: HashMap<String, Vec<i32>> = HashMap::new();
            for l in list {
                parts
                    .entry(l.topic.0.to_string())
                    .or_default()
                    .extend(l.partitions);
            }
            let names: Vec<String> = parts.keys().cloned().collect();
            shard
                .agent
                .meta
                .load_topics(Some(names))
                .await
                .map_err(code)
                .map(|found| {
                    found
                        .into_iter()
                        .map(|t| {
                            let p = parts.remove(&t.name);
                            (t, p)
                        })
                        .collect()
                })
        }
    };
    let dir = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(&shard.agent.cfg.log_dir))
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    let asked = match asked {
        Ok(a) => a,
        Err(code) => {
            return DescribeLogDirsResponse::default()
                .with_results(vec![dir.with_error_code(code.code())]);
        }
    };
    // What this agent leads, of the topics the principal may describe.
    let agents = listener_agents(shard, req);
    let me = shard.agent.agent_id;
    let mut held: Vec<(TopicRecord, Vec<i32>)> = asked
        .into_iter()
        .filter(|(t, _)| visible(shard, req, op::DESCRIBE, resource::TOPIC, &t.name))
        .map(|(t, parts)| {
            let parts = match parts {
                Some(p) => p
                    .into_iter()
                    .filter(|p| (0..t.partitions).contains(p))
                    .collect(),
                None => (0..t.partitions).collect::<Vec<_>>(),
            };
            let mine: Vec<i32> = parts
                .into_iter()
                .filter(|&p| leader_of(&agents, t.topic_id, p).0 == me)
                .collect();
            (t, mine)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    held.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let ids = held.iter().map(|(t, _)| t.topic_id).collect();
    let sizes: HashMap<(uuid::Uuid, i32), i64> = match shard.agent.meta.partition_bytes(ids).await {
        Ok(rows) => rows.into_iter().map(|(t, p, n)| ((t, p), n)).collect(),
        Err(e) => {
            return DescribeLogDirsResponse::default()
                .with_results(vec![dir.with_error_code(ErrorCode::from(&e).code())]);
        }
    };
    let topics = held
        .into_iter()
        .map(|(t, parts)| {
            DescribeLogDirsTopic::default()
                .with_name(TopicName(str_bytes(&t.name)))
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|p| {
                            DescribeLogDirsPartition::default()
                                .with_partition_index(p)
                                .with_partition_size(
                                    sizes.get(&(t.topic_id, p)).copied().unwrap_or(0),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(vec![dir.with_topics(topics)])
}
