//! StreamsGroupHeartbeat (key 88, KIP-1071): a Kafka Streams member joins
//! with its application's topology, reports the tasks it owns and leaves;
//! the coordinator answers with its epoch, its active and standby tasks,
//! the group's status (missing topics, delayed assignment, shutdown) and
//! the endpoints of interactive queries. Internal topics the group waits
//! for are created here, as the caller (Kafka's broker does so too:
//! Streams does not create them under this protocol).

use std::sync::atomic::Ordering;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};

use super::access::allowed;
use super::generated::streams_group_heartbeat_request as rq;
use super::generated::streams_group_heartbeat_response::{
    Endpoint, EndpointToPartitions, Status, TaskIds, TopicPartition,
};
use super::generated::{StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse};
use super::{group_coordinator, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::groups::streams::topology::{CopartitionGroup, Subtopology, TopicInfo};
use crate::groups::streams::{
    status, StreamsHeartbeatArgs, StreamsHeartbeatResult, TaskSet, Tasks, Topology,
};
use crate::limits::{
    STREAMS_MEMBER_ID_BYTES_MAX, STREAMS_SUBTOPOLOGIES_MAX, STREAMS_TOPOLOGY_TOPICS_MAX,
};
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::topics;

/// StreamsGroupHeartbeat, version 0 (Kafka 4.2).
pub const API: Api<StreamsGroupHeartbeatRequest> = Api::generated(0, 0);

/// Kafka's internal topics: never part of a topology.
const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: StreamsGroupHeartbeatRequest,
) -> StreamsGroupHeartbeatResponse {
    let group_id = body.group_id.to_string();
    let mut result = heartbeat(shard, req, body).await;
    if let Some(m) = &result.error_message {
        tracing::info!(group = %group_id, client = %req.client_id(), error = ?result.error, message = %m,
            "streams group heartbeat refused");
    }
    if !result.create.is_empty() {
        create_internal_topics(shard, req, &mut result).await;
    }
    let tasks = |set: &TaskSet| {
        task_list(set, |subtopology_id, partitions| TaskIds {
            subtopology_id,
            partitions,
            ..Default::default()
        })
    };
    let partitions = |list: Vec<(String, Vec<i32>)>| -> Vec<TopicPartition> {
        list.into_iter()
            .map(|(t, partitions)| TopicPartition {
                topic: TopicName(str_bytes(&t)),
                partitions,
                ..Default::default()
            })
            .collect()
    };
    let failed = result.error != ErrorCode::None;
    let a = result.assignment.as_ref();
    StreamsGroupHeartbeatResponse {
        error_code: result.error.code(),
        error_message: result.error_message.as_deref().map(str_bytes),
        member_id: str_bytes(&result.member_id),
        member_epoch: result.member_epoch,
        heartbeat_interval_ms: result.heartbeat_interval_ms,
        // The client takes a null list as "unchanged"; an answer always
        // says what holds now.
        status: (!failed).then(|| {
            result
                .statuses
                .iter()
                .map(|(code, detail)| Status {
                    status_code: *code,
                    status_detail: str_bytes(detail),
                    ..Default::default()
                })
                .collect()
        }),
        active_tasks: a.map(|t| tasks(&t.active)),
        standby_tasks: a.map(|t| tasks(&t.standby)),
        warmup_tasks: a.map(|_| Vec::new()),
        endpoint_information_epoch: result.endpoint_epoch,
        partitions_by_user_endpoint: result.endpoints.map(|list| {
            list.into_iter()
                .map(|((host, port), active, standby)| EndpointToPartitions {
                    user_endpoint: Endpoint {
                        host: str_bytes(&host),
                        port,
                        ..Default::default()
                    },
                    active_partitions: partitions(active),
                    standby_partitions: partitions(standby),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    }
}

/// Tasks by subtopology as the wire lists them (`make` builds one entry
/// of the response type at hand).
pub(super) fn task_list<T>(
    set: &TaskSet,
    make: impl Fn(kafka_protocol::protocol::StrBytes, Vec<i32>) -> T,
) -> Vec<T> {
    set.iter()
        .map(|(s, ps)| make(str_bytes(s), ps.iter().copied().collect()))
        .collect()
}

fn blank(s: &Option<kafka_protocol::protocol::StrBytes>) -> bool {
    s.as_ref().is_some_and(|v| v.trim().is_empty())
}

/// A refused request: its error and message.
type Refusal = (ErrorCode, String);

fn bad(message: &str) -> Refusal {
    (ErrorCode::InvalidRequest, message.to_owned())
}

/// Kafka's request checks (features 4.2 does not serve yet, then the
/// fields' rules), before the coordinator sees it.
fn check(body: &StreamsGroupHeartbeatRequest) -> Result<(), Refusal> {
    if body.instance_id.is_some() {
        return Err(bad("Static membership is not yet supported."));
    }
    if body.task_offsets.is_some() {
        return Err(bad("TaskOffsets are not supported yet."));
    }
    if body.task_end_offsets.is_some() {
        return Err(bad("TaskEndOffsets are not supported yet."));
    }
    if body.warmup_tasks.as_ref().is_some_and(|w| !w.is_empty()) {
        return Err(bad("WarmupTasks are not supported yet."));
    }
    if let Some(t) = &body.topology {
        if t.subtopologies
            .iter()
            .any(|s| !s.source_topic_regex.is_empty())
        {
            return Err(bad(
                "Regular expressions for source topics are not supported yet.",
            ));
        }
    }
    if body.member_id.trim().is_empty() {
        return Err(bad("MemberId can't be empty."));
    }
    if body.member_id.len() > STREAMS_MEMBER_ID_BYTES_MAX || body.member_id.contains('\0') {
        return Err(bad("MemberId must be at most 255 characters, without NUL."));
    }
    if blank(&body.rack_id) {
        return Err(bad("RackId can't be empty."));
    }
    match body.member_epoch {
        0 => {
            if body.rebalance_timeout_ms == -1 {
                return Err(bad("RebalanceTimeoutMs must be provided in first request."));
            }
            let held = |t: &Option<Vec<rq::TaskIds>>| t.as_ref().is_some_and(|v| !v.is_empty());
            if held(&body.active_tasks) || held(&body.standby_tasks) || held(&body.warmup_tasks) {
                return Err(bad("ActiveTasks must be empty when (re-)joining."));
            }
            let Some(t) = &body.topology else {
                return Err(bad("Topology must be non-null when (re-)joining."));
            };
            for s in &t.subtopologies {
                for c in &s.state_changelog_topics {
                    if c.partitions != 0 {
                        return Err((
                            ErrorCode::StreamsInvalidTopology,
                            format!(
                                "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                                c.name.0, c.partitions
                            ),
                        ));
                    }
                }
            }
        }
        -2 => return Err(bad("InstanceId can't be null.")),
        e if e < -2 => {
            return Err(bad(&format!(
                "MemberEpoch is {e}, but must be greater than or equal to -2."
            )))
        }
        _ => {}
    }
    let some = [&body.active_tasks, &body.standby_tasks, &body.warmup_tasks]
        .iter()
        .filter(|t| t.is_some())
        .count();
    if some != 0 && some != 3 {
        return Err(bad("If one task-type is non-null, all must be non-null."));
    }
    if body.member_epoch != 0 && body.topology.is_some() {
        return Err(bad("Topology can only be provided when (re-)joining."));
    }
    Ok(())
}

fn topology_of(t: rq::Topology) -> Topology {
    let info = |i: rq::TopicInfo| TopicInfo {
        name: i.name.to_string(),
        partitions: i.partitions,
        replication_factor: i.replication_factor,
        configs: i
            .topic_configs
            .into_iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
    };
    let names =
        |v: Vec<TopicName>| -> Vec<String> { v.into_iter().map(|s| s.0.to_string()).collect() };
    Topology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .into_iter()
            .map(|s| Subtopology {
                id: s.subtopology_id.to_string(),
                source_topics: names(s.source_topics),
                repartition_sink_topics: names(s.repartition_sink_topics),
                state_changelog_topics: s.state_changelog_topics.into_iter().map(info).collect(),
                repartition_source_topics: s
                    .repartition_source_topics
                    .into_iter()
                    .map(info)
                    .collect(),
                copartition_groups: s
                    .copartition_groups
                    .into_iter()
                    .map(|g| CopartitionGroup {
                        source_topics: g.source_topics,
                        repartition_source_topics: g.repartition_source_topics,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn task_set(list: Vec<rq::TaskIds>) -> TaskSet {
    let mut out = TaskSet::new();
    for t in list {
        out.entry(t.subtopology_id.to_string())
            .or_default()
            .extend(t.partitions);
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

async fn heartbeat(
    shard: &Shard,
    req: &Req,
    body: StreamsGroupHeartbeatRequest,
) -> StreamsHeartbeatResult {
    let groups = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Ok(g) => g,
        Err(ErrorCode::InvalidGroupId) => {
            return StreamsHeartbeatResult::error(
                ErrorCode::InvalidRequest,
                "GroupId can't be empty.".to_owned(),
            )
        }
        Err(e) => return StreamsHeartbeatResult::error(e, None),
    };
    if let Err((code, message)) = check(&body) {
        return StreamsHeartbeatResult::error(code, message);
    }
    let mut resolved = Vec::new();
    let topology = body.topology.map(topology_of);
    if let Some(t) = &topology {
        let names = t.topic_names();
        if names.len() > STREAMS_TOPOLOGY_TOPICS_MAX
            || t.subtopologies.len() > STREAMS_SUBTOPOLOGIES_MAX
        {
            tracing::info!(group = %body.group_id.0, topics = names.len(), subtopologies = t.subtopologies.len(),
                "streams topology refused: too large");
            return StreamsHeartbeatResult::error(
                ErrorCode::StreamsInvalidTopology,
                format!("A topology has at most {STREAMS_SUBTOPOLOGIES_MAX} subtopologies and names at most {STREAMS_TOPOLOGY_TOPICS_MAX} topics."),
            );
        }
        let internal: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| INTERNAL_TOPICS.contains(n))
            .collect();
        if !internal.is_empty() {
            return StreamsHeartbeatResult::error(
                ErrorCode::StreamsInvalidTopology,
                format!(
                    "Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.",
                    internal.join(", ")
                ),
            );
        }
        let bad: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| topics::valid_name(n).is_err())
            .collect();
        if !bad.is_empty() {
            return StreamsHeartbeatResult::error(
                ErrorCode::StreamsInvalidTopology,
                format!("Topic names {} are not valid topic names.", bad.join(", ")),
            );
        }
        if names
            .iter()
            .any(|n| !allowed(shard, req, op::DESCRIBE, resource::TOPIC, n))
        {
            return StreamsHeartbeatResult::error(ErrorCode::TopicAuthorizationFailed, None);
        }
        for n in &names {
            if let Ok(Some(t)) = shard.topics.by_name(n).await {
                resolved.push((t.name, t.topic_id, t.partitions));
            }
        }
    }
    let owned = match (body.active_tasks, body.standby_tasks) {
        (Some(active), Some(standby)) => Some(Tasks {
            active: task_set(active),
            standby: task_set(standby),
        }),
        _ => None,
    };
    let group_id = body.group_id.to_string();
    let ms = |c: &crate::dynamic::Configs, name| {
        c.group_ms(&group_id, name)
            .map(std::time::Duration::from_millis)
    };
    let (session_timeout, heartbeat_interval, initial_rebalance_delay, standby_replicas) =
        shard.configs.with(&shard.agent.dynamic.copy, |c| {
            (
                ms(c, "streams.session.timeout.ms"),
                ms(c, "streams.heartbeat.interval.ms"),
                ms(c, "streams.initial.rebalance.delay.ms"),
                c.group_ms(&group_id, "streams.num.standby.replicas")
                    .and_then(|n| u32::try_from(n).ok()),
            )
        });
    let args = StreamsHeartbeatArgs {
        group_id: group_id.clone(),
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        endpoint_information_epoch: body.endpoint_information_epoch,
        rack_id: body.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        topology,
        owned,
        process_id: body.process_id.map(|s| s.to_string()),
        user_endpoint: body.user_endpoint.map(|e| (e.host.to_string(), e.port)),
        client_tags: body.client_tags.map(|tags| {
            tags.into_iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        }),
        shutdown_application: body.shutdown_application,
        client_id: req.client_id(),
        client_host: req.client_host(),
        session_timeout,
        heartbeat_interval,
        initial_rebalance_delay,
        standby_replicas,
    };
    groups.streams_heartbeat(args, resolved).await
}

/// Creates the internal topics the group waits for, with the caller's
/// rights (CREATE on the cluster, or on each topic) through CreateTopics'
/// own path; what could not be made is told in the MISSING_INTERNAL_TOPICS
/// status. The coordinator learns the topics made at once.
async fn create_internal_topics(shard: &Shard, req: &Req, result: &mut StreamsHeartbeatResult) {
    // CreateTopics checks CREATE (on the cluster, or on each topic) as
    // Kafka does for these topics.
    let create = std::mem::take(&mut result.create);
    let body = CreateTopicsRequest::default().with_topics(
        create
            .iter()
            .map(|c| {
                CreatableTopic::default()
                    .with_name(TopicName(str_bytes(&c.name)))
                    .with_num_partitions(c.partitions)
                    .with_replication_factor(c.replication_factor)
                    .with_configs(
                        c.configs
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(str_bytes(k))
                                    .with_value(Some(str_bytes(v)))
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    let mut made = Vec::new();
    let mut failed = Vec::new();
    let mut unauthorized = Vec::new();
    let answer = super::create_topics::handle(shard, req, body).await;
    for t in answer.topics {
        let name = t.name.0.to_string();
        match t.error_code {
            0 => made.push((name, t.topic_id, t.num_partitions)),
            c if c == ErrorCode::TopicAlreadyExists.code() => {}
            c if c == ErrorCode::TopicAuthorizationFailed.code() => unauthorized.push(name),
            c => {
                let why = t
                    .error_message
                    .map_or_else(|| format!("error {c}"), |m| m.to_string());
                tracing::warn!(topic = %name, error = c, reason = %why, "cannot create a streams group's internal topic");
                failed.push(format!("{name} ({why})"));
            }
        }
    }
    let m = &shard.metrics;
    m.streams_internal_topics_created
        .fetch_add(made.len() as u64, Ordering::Relaxed);
    m.streams_internal_topics_refused.fetch_add(
        (failed.len() + unauthorized.len()) as u64,
        Ordering::Relaxed,
    );
    if !made.is_empty() {
        shard.agent.groups().topics_created(made).await;
    }
    let mut more = String::new();
    if !unauthorized.is_empty() {
        let names = unauthorized.join(", ");
        tracing::info!(topics = %names, client = %req.client_id(),
            "streams group internal topics not created: no CREATE permission");
        more.push_str(&format!(" Unauthorized to CREATE on topics {names}."));
    }
    if !failed.is_empty() {
        let shown: Vec<&str> = failed.iter().take(3).map(String::as_str).collect();
        more.push_str(&format!("; Creation failed: {}", shown.join(", ")));
        if failed.len() > 3 {
            more.push_str(&format!(" and {} more", failed.len() - 3));
        }
        more.push('.');
    }
    if !more.is_empty() {
        if let Some(s) = result
            .statuses
            .iter_mut()
            .find(|s| s.0 == status::MISSING_INTERNAL_TOPICS)
        {
            s.1.push_str(&more);
        }
    }
}
