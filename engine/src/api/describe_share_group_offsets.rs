//! DescribeShareGroupOffsets (key 90, KIP-932): where each partition's
//! consumption by a share group starts (the share-partition start offset,
//! SPSO); -1 for a partition the group has not consumed.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as Group,
    DescribeShareGroupOffsetsResponsePartition as Partition,
    DescribeShareGroupOffsetsResponseTopic as Topic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use uuid::Uuid;

use super::access::allowed;
use super::{group_coordinator, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// DescribeShareGroupOffsets, version 0 (v1 adds the lag).
pub const API: Api<DescribeShareGroupOffsetsRequest> =
    Api::new(ApiKey::DescribeShareGroupOffsets, 0, 0);

fn partition(index: i32, start: i64, error: ErrorCode) -> Partition {
    Partition::default()
        .with_partition_index(index)
        .with_start_offset(start)
        .with_leader_epoch(-1)
        .with_error_code(error.code())
}

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut out = Vec::with_capacity(body.groups.len());
    for g in body.groups {
        let group_id = g.group_id.to_string();
        let error = |e: ErrorCode, m: Option<String>| {
            Group::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(e.code())
                .with_error_message(m.map(|m| str_bytes(&m)))
        };
        let groups = match group_coordinator(shard, req, op::DESCRIBE, &group_id) {
            Ok(gs) => gs,
            Err(e) => {
                out.push(error(e, None));
                continue;
            }
        };
        let d = groups.share_describe(group_id.clone()).await;
        if d.error != ErrorCode::None {
            out.push(error(d.error, d.error_message));
            continue;
        }
        let stored = match shard.agent.meta.share_offsets(group_id.clone()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(group = %group_id, error = %e, "cannot read share group offsets");
                out.push(error(ErrorCode::from(&e), None));
                continue;
            }
        };
        let starts: BTreeMap<(Uuid, i32), i64> =
            stored.iter().map(|(t, p, _, s)| ((*t, *p), *s)).collect();
        let mut topics = Vec::new();
        match g.topics {
            Some(asked) => {
                for t in asked {
                    let name = t.topic_name.0.as_str();
                    let denied = !allowed(shard, req, op::DESCRIBE, resource::TOPIC, name);
                    let found = if denied {
                        None
                    } else {
                        shard
                            .topics
                            .by_name(name)
                            .await
                            .ok()
                            .flatten()
                            .map(|r| r.topic_id)
                    };
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|&p| match (denied, found) {
                            (true, _) => partition(p, -1, ErrorCode::TopicAuthorizationFailed),
                            (false, None) => partition(p, -1, ErrorCode::None),
                            (false, Some(id)) => partition(
                                p,
                                starts.get(&(id, p)).copied().unwrap_or(-1),
                                ErrorCode::None,
                            ),
                        })
                        .collect();
                    topics.push(
                        Topic::default()
                            .with_topic_name(t.topic_name)
                            .with_topic_id(found.unwrap_or(Uuid::nil()))
                            .with_partitions(partitions),
                    );
                }
            }
            None => {
                let mut by_topic: BTreeMap<Uuid, Vec<Partition>> = BTreeMap::new();
                for ((t, p), s) in &starts {
                    by_topic
                        .entry(*t)
                        .or_default()
                        .push(partition(*p, *s, ErrorCode::None));
                }
                for (id, partitions) in by_topic {
                    let Ok(Some(rec)) = shard.topics.by_id(id).await else {
                        continue;
                    };
                    if !allowed(shard, req, op::DESCRIBE, resource::TOPIC, &rec.name) {
                        continue;
                    }
                    topics.push(
                        Topic::default()
                            .with_topic_name(TopicName(str_bytes(&rec.name)))
                            .with_topic_id(id)
                            .with_partitions(partitions),
                    );
                }
            }
        }
        out.push(error(ErrorCode::None, None).with_topics(topics));
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(out)
}
