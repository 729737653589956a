//! OffsetFetch (key 9): committed offsets of one group (v0–7) or several
//! (v8+). They are read from PostgreSQL, so any agent answers: a commit is
//! acknowledged only once written there. A v9 request naming a member is
//! checked by the group's coordinator first (KIP-848 member epochs).

use std::collections::HashMap;

use kafka_protocol::messages::{ApiKey, TopicName};
use rutomq_meta::groups::CommittedOffset;
use uuid::Uuid;

use super::access::{allowed, visible};
use super::generated::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use super::generated::{OffsetFetchRequest, OffsetFetchResponse};
use super::{group_coordinator, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// One partition's answer: (offset, leader epoch, metadata, error).
type Answer = (i64, i32, String, ErrorCode);
/// The answer for one group: topics in order, each with its partitions.
type GroupAnswer = Result<Vec<(String, Vec<(i32, Answer)>)>, ErrorCode>;

/// OffsetFetch, versions 1–10 (10 names topics by id; codec generated from
/// Kafka 4.3's spec).
pub const API: Api<OffsetFetchRequest> = Api::new(ApiKey::OffsetFetch, 1, 10);

pub async fn handle(shard: &Shard, req: &Req, body: OffsetFetchRequest) -> OffsetFetchResponse {
    if req.version >= 8 {
        let mut groups = Vec::with_capacity(body.groups.len());
        for g in body.groups {
            // v10 names topics by id: the ids found are kept for the
            // answer; those unknown here are answered UNKNOWN_TOPIC_ID,
            // after the others.
            let mut ids: HashMap<String, Uuid> = HashMap::new();
            let mut unknown: Vec<(Uuid, Vec<i32>)> = Vec::new();
            let wanted = match g.topics {
                None => None,
                Some(ts) => {
                    let mut named = Vec::with_capacity(ts.len());
                    for t in ts {
                        if req.version < 10 {
                            named.push((t.name.0.to_string(), t.partition_indexes));
                        } else if let Ok(Some(rec)) = shard.topics.by_id(t.topic_id).await {
                            ids.insert(rec.name.clone(), rec.topic_id);
                            named.push((rec.name, t.partition_indexes));
                        } else {
                            unknown.push((t.topic_id, t.partition_indexes));
                        }
                    }
                    Some(named)
                }
            };
            // v9: a member names itself and its epoch; a KIP-848 group
            // answers only its current members (STALE_MEMBER_EPOCH).
            let member = g.member_id.as_ref().filter(|m| !m.is_empty());
            let check = match member {
                None => ErrorCode::None,
                Some(m) => match group_coordinator(shard, req, op::DESCRIBE, &g.group_id) {
                    Err(e) => e,
                    Ok(groups) => {
                        groups
                            .validate_fetch(g.group_id.to_string(), m.to_string(), g.member_epoch)
                            .await
                    }
                },
            };
            let answer = if check == ErrorCode::None {
                fetch(
                    shard,
                    req,
                    g.group_id.to_string(),
                    wanted,
                    body.require_stable,
                )
                .await
            } else {
                Err(check)
            };
            let mut out = OffsetFetchResponseGroup::default().with_group_id(g.group_id);
            match answer {
                Err(e) => out.error_code = e.code(),
                Ok(topics) => {
                    out.topics = group_topics(shard, req.version, topics, ids, unknown).await
                }
            }
            groups.push(out);
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    // v0-1 always name topics; v2+ may ask for all with null.
    let wanted = body.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    match fetch(
        shard,
        req,
        body.group_id.to_string(),
        wanted,
        body.require_stable,
    )
    .await
    {
        // v1 has no top-level error code: the client retries on an empty answer.
        Err(e) if req.version < 2 => {
            tracing::debug!(error = ?e, "offset fetch failed");
            OffsetFetchResponse::default()
        }
        Err(e) => OffsetFetchResponse::default().with_error_code(e.code()),
        Ok(topics) => OffsetFetchResponse::default().with_topics(
            topics
                .into_iter()
                .map(|(name, parts)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(str_bytes(&name)))
                        .with_partitions(
                            parts
                                .into_iter()
                                .map(|(p, (o, e, m, code))| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_committed_leader_epoch(e)
                                        .with_metadata(Some(str_bytes(&m)))
                                        .with_error_code(code.code())
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    }
}

/// A v8+ group's topics as answered: named (v8-9) or by id (v10: the ids
/// the request named, `ids`; asked for all, each topic's id looked up;
/// `unknown` ids answer UNKNOWN_TOPIC_ID).
async fn group_topics(
    shard: &Shard,
    version: i16,
    topics: Vec<(String, Vec<(i32, Answer)>)>,
    ids: HashMap<String, Uuid>,
    unknown: Vec<(Uuid, Vec<i32>)>,
) -> Vec<OffsetFetchResponseTopics> {
    let partition = |p: i32, (o, e, m, code): Answer| {
        OffsetFetchResponsePartitions::default()
            .with_partition_index(p)
            .with_committed_offset(o)
            .with_committed_leader_epoch(e)
            .with_metadata(Some(str_bytes(&m)))
            .with_error_code(code.code())
    };
    let mut out = Vec::with_capacity(topics.len() + unknown.len());
    for (name, parts) in topics {
        let mut t = OffsetFetchResponseTopics::default()
            .with_partitions(parts.into_iter().map(|(p, a)| partition(p, a)).collect());
        if version >= 10 {
            // A topic deleted since its offsets were committed has no id:
            // left out.
            t.topic_id = match ids.get(&name) {
                Some(&id) => id,
                None => match shard.topics.by_name(&name).await {
                    Ok(Some(rec)) => rec.topic_id,
                    _ => continue,
                },
            };
        } else {
            t.name = TopicName(str_bytes(&name));
        }
        out.push(t);
    }
    for (id, parts) in unknown {
        let unknown_id = || (-1, -1, String::new(), ErrorCode::UnknownTopicId);
        out.push(
            OffsetFetchResponseTopics::default()
                .with_topic_id(id)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|p| partition(p, unknown_id()))
                        .collect(),
                ),
        );
    }
    out
}

/// The committed offsets of `group_id` for `wanted` (topic, partitions), or
/// of every partition with one when `None`. A partition without a commit
/// answers offset -1, as Kafka does. Kafka's checks: DESCRIBE on the group
/// (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each named topic
/// (TOPIC_AUTHORIZATION_FAILED per partition); asked for all, the topics
/// the principal may not describe are left out.
async fn fetch(
    shard: &Shard,
    req: &Req,
    group_id: String,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupAnswer {
    if !allowed(shard, req, op::DESCRIBE, resource::GROUP, &group_id) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    let all = wanted.is_none();
    let mut answer = fetch_committed(shard, group_id.clone(), wanted).await?;
    if all {
        answer.retain(|(name, _)| visible(shard, req, op::DESCRIBE, resource::TOPIC, name));
    } else {
        for (name, parts) in answer.iter_mut() {
            if !allowed(shard, req, op::DESCRIBE, resource::TOPIC, name) {
                for (_, a) in parts.iter_mut() {
                    *a = (-1, -1, String::new(), ErrorCode::TopicAuthorizationFailed);
                }
            }
        }
    }
    if require_stable {
        // KIP-447: a partition with offsets pending in an open transaction
        // answers UNSTABLE_OFFSET_COMMIT (the client retries), so a new
        // owner never starts from offsets that transaction may replace.
        let pending = shard
            .agent
            .meta
            .txn_pending_offsets(group_id)
            .await
            .map_err(|_| ErrorCode::CoordinatorLoadInProgress)?;
        if !pending.is_empty() {
            for (name, parts) in answer.iter_mut() {
                for (p, a) in parts.iter_mut() {
                    // A refused topic stays refused (its transactions are
                    // none of the principal's business).
                    if a.3 != ErrorCode::TopicAuthorizationFailed
                        && pending.contains(&(name.clone(), *p))
                    {
                        *a = (-1, -1, String::new(), ErrorCode::UnstableOffsetCommit);
                    }
                }
            }
        }
    }
    Ok(answer)
}

async fn fetch_committed(
    shard: &Shard,
    group_id: String,
    wanted: Option<Vec<(String, Vec<i32>)>>,
) -> GroupAnswer {
    let names = wanted
        .as_ref()
        .map(|w| w.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
    let rows = shard
        .agent
        .meta
        .fetch_offsets(group_id, names)
        .await
        .map_err(|e| {
            if e.is_retriable() {
                ErrorCode::CoordinatorLoadInProgress
            } else {
                ErrorCode::from(&e)
            }
        })?;
    let answer = |c: &CommittedOffset| -> Answer {
        (
            c.offset,
            c.leader_epoch,
            c.metadata
                .as_deref()
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .unwrap_or_default(),
            ErrorCode::None,
        )
    };
    match wanted {
        None => {
            let mut out: Vec<(String, Vec<(i32, Answer)>)> = Vec::new();
            for c in &rows {
                match out.last_mut() {
                    Some((name, parts)) if *name == c.topic => parts.push((c.partition, answer(c))),
                    _ => out.push((c.topic.clone(), vec![(c.partition, answer(c))])),
                }
            }
            Ok(out)
        }
        Some(wanted) => {
            let found: HashMap<(&str, i32), &CommittedOffset> = rows
                .iter()
                .map(|c| ((c.topic.as_str(), c.partition), c))
                .collect();
            Ok(wanted
                .iter()
                .map(|(name, parts)| {
                    let parts = parts
                        .iter()
                        .map(|&p| {
                            let a = found
                                .get(&(name.as_str(), p))
                                .map_or((-1, -1, String::new(), ErrorCode::None), |c| answer(c));
                            (p, a)
                        })
                        .collect();
                    (name.clone(), parts)
                })
                .collect())
        }
    }
}
