//! StreamsGroupDescribe (key 89, KIP-1071): streams groups with their
//! topology (partitions as decided), members, tasks and targets (DESCRIBE
//! on the group; a topology naming a topic the caller may not describe is
//! TOPIC_AUTHORIZATION_FAILED, as in Kafka).

use kafka_protocol::messages::{GroupId, TopicName};

use super::access::visible;
use super::generated::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, Subtopology, TaskIds, TopicInfo,
    Topology,
};
use super::generated::{StreamsGroupDescribeRequest, StreamsGroupDescribeResponse};
use super::{group_coordinator, group_operations, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::groups::streams::{topology, TaskSet, Tasks};
use crate::groups::StreamsDescription;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// Kafka's message for a group answered without its members.
const UNDESCRIBABLE_TOPICS: &str =
    "The described group uses topics that the client is not authorized to describe.";

/// StreamsGroupDescribe, version 0 (Kafka 4.2).
pub const API: Api<StreamsGroupDescribeRequest> = Api::generated(0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: StreamsGroupDescribeRequest,
) -> StreamsGroupDescribeResponse {
    let mut out = Vec::with_capacity(body.group_ids.len());
    for group_id in body.group_ids {
        let d = match group_coordinator(shard, req, op::DESCRIBE, &group_id) {
            Err(e) => {
                out.push(DescribedGroup {
                    group_id,
                    error_code: e.code(),
                    authorized_operations: i32::MIN,
                    ..Default::default()
                });
                continue;
            }
            Ok(groups) => groups.streams_describe(group_id.to_string()).await,
        };
        if d.error != ErrorCode::None {
            out.push(DescribedGroup {
                group_id,
                error_code: d.error.code(),
                error_message: d.error_message.as_deref().map(str_bytes),
                authorized_operations: i32::MIN,
                ..Default::default()
            });
            continue;
        }
        let hidden = d.topology.as_ref().is_some_and(|t| {
            t.topic_names()
                .iter()
                .any(|n| !visible(shard, req, op::DESCRIBE, resource::TOPIC, n))
        });
        if hidden {
            out.push(DescribedGroup {
                group_id,
                error_code: ErrorCode::TopicAuthorizationFailed.code(),
                error_message: Some(str_bytes(UNDESCRIBABLE_TOPICS)),
                authorized_operations: i32::MIN,
                ..Default::default()
            });
            continue;
        }
        let ops = group_operations(
            shard,
            req,
            body.include_authorized_operations,
            &group_id,
            d.error,
        );
        out.push(described(group_id, d, ops));
    }
    StreamsGroupDescribeResponse {
        groups: out,
        ..Default::default()
    }
}

fn task_ids(set: &TaskSet) -> Vec<TaskIds> {
    super::streams_group_heartbeat::task_list(set, |subtopology_id, partitions| TaskIds {
        subtopology_id,
        partitions,
        ..Default::default()
    })
}

fn assignment(t: &Tasks) -> Assignment {
    Assignment {
        active_tasks: task_ids(&t.active),
        standby_tasks: task_ids(&t.standby),
        warmup_tasks: Vec::new(),
        ..Default::default()
    }
}

fn key_values(list: &[(String, String)]) -> Vec<KeyValue> {
    list.iter()
        .map(|(k, v)| KeyValue {
            key: str_bytes(k),
            value: str_bytes(v),
            ..Default::default()
        })
        .collect()
}

fn described(group_id: GroupId, d: StreamsDescription, ops: i32) -> DescribedGroup {
    // Partitions of internal topics as decided, when the topology runs.
    let info = |i: &topology::TopicInfo| TopicInfo {
        name: TopicName(str_bytes(&i.name)),
        partitions: d
            .partitions
            .as_ref()
            .and_then(|p| p.get(&i.name).copied())
            .unwrap_or(i.partitions),
        replication_factor: i.replication_factor.max(0),
        topic_configs: key_values(&i.configs),
        ..Default::default()
    };
    let topology = d.topology.as_ref().map(|t| {
        let mut subs: Vec<&topology::Subtopology> = t.subtopologies.iter().collect();
        subs.sort_by(|a, b| a.id.cmp(&b.id));
        Topology {
            epoch: t.epoch,
            subtopologies: Some(
                subs.into_iter()
                    .map(|s| Subtopology {
                        subtopology_id: str_bytes(&s.id),
                        source_topics: s
                            .source_topics
                            .iter()
                            .map(|n| TopicName(str_bytes(n)))
                            .collect(),
                        repartition_sink_topics: s
                            .repartition_sink_topics
                            .iter()
                            .map(|n| TopicName(str_bytes(n)))
                            .collect(),
                        state_changelog_topics: s.state_changelog_topics.iter().map(info).collect(),
                        repartition_source_topics: s
                            .repartition_source_topics
                            .iter()
                            .map(info)
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    });
    let members = d
        .members
        .iter()
        .map(|(m, target)| Member {
            member_id: str_bytes(&m.member_id),
            member_epoch: m.epoch,
            instance_id: None,
            rack_id: m.rack_id.as_deref().map(str_bytes),
            client_id: str_bytes(&m.client_id),
            client_host: str_bytes(&m.client_host),
            topology_epoch: m.topology_epoch,
            process_id: str_bytes(&m.process_id),
            user_endpoint: m.user_endpoint.as_ref().map(|(host, port)| Endpoint {
                host: str_bytes(host),
                port: *port,
                ..Default::default()
            }),
            client_tags: key_values(&m.client_tags),
            task_offsets: Vec::new(),
            task_end_offsets: Vec::new(),
            assignment: assignment(&m.assigned),
            target_assignment: assignment(target),
            is_classic: false,
            ..Default::default()
        })
        .collect();
    DescribedGroup {
        error_code: 0,
        error_message: None,
        group_id,
        group_state: str_bytes(d.state),
        group_epoch: d.group_epoch,
        assignment_epoch: d.assignment_epoch,
        // Never null for a group that exists: Kafka's admin client needs it.
        topology: Some(topology.unwrap_or(Topology {
            epoch: -1,
            subtopologies: Some(Vec::new()),
            ..Default::default()
        })),
        members,
        authorized_operations: ops,
        ..Default::default()
    }
}
