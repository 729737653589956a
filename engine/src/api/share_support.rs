//! What ShareFetch and ShareAcknowledge share: who asks (group READ, a
//! member id), the group's rules (its configs), the partitions asked for,
//! and acknowledgements applied to share-partitions.

use std::collections::HashMap;

use uuid::Uuid;

use super::access::allowed;
use super::Req;
use crate::error::ErrorCode;
use crate::limits::{SHARE_ACK_BATCHES_MAX, SHARE_MEMBER_ID_BYTES_MAX as MEMBER_ID_BYTES_MAX};
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::share::partition::Rules;
use crate::share::sessions::Key;
use crate::share::store::{change, Changed, StartAt};

/// Acknowledgement batches: (first, last, types).
pub type Batches = Vec<(i64, i64, Vec<i8>)>;

/// A refusal: Kafka's error and why.
pub type Refused = (ErrorCode, String);

/// The group and member a share request comes from, checked as Kafka does
/// (READ on the group, a member id of 1 to 36 characters).
pub fn requester(
    shard: &Shard,
    req: &Req,
    group_id: Option<&str>,
    member_id: Option<&str>,
) -> Result<(String, String), Refused> {
    let group = group_id.unwrap_or_default();
    if group.is_empty() || group.contains('\0') {
        return Err((ErrorCode::InvalidGroupId, "GroupId can't be empty.".into()));
    }
    if !allowed(shard, req, op::READ, resource::GROUP, group) {
        return Err((ErrorCode::GroupAuthorizationFailed, String::new()));
    }
    let member = member_id.unwrap_or_default();
    if member.is_empty() || member.len() > MEMBER_ID_BYTES_MAX || member.contains('\0') {
        return Err((
            ErrorCode::InvalidRequest,
            "MemberId must be 1 to 36 characters.".into(),
        ));
    }
    Ok((group.to_owned(), member.to_owned()))
}

/// The group's rules, where its new share-partitions start and whether it
/// reads committed records only, from its group configs (Kafka's defaults
/// otherwise).
pub fn rules_of(shard: &Shard, group: &str) -> (Rules, StartAt, bool) {
    let mut rules: Rules = shard.agent.groups().cfg.share.rules;
    shard.configs.with(&shard.agent.dynamic.copy, |c| {
        if let Some(ms) = c.group_ms(group, "share.record.lock.duration.ms") {
            rules.lock_ms = ms.min(i64::MAX as u64) as i64;
        }
        let start = StartAt::parse(c.group_value(group, "share.auto.offset.reset").as_deref());
        let committed = c
            .group_value(group, "share.isolation.level")
            .is_some_and(|v| v.trim() == "read_committed");
        (rules, start, committed)
    })
}

/// A topic asked for by id, resolved: its name, or the error each of its
/// partitions gets (UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED), and the
/// partitions that exist.
pub struct Topic {
    pub name: Result<String, ErrorCode>,
    pub partitions: i32,
}

/// Resolves topic ids, each checked for READ.
pub async fn resolve_topics(
    shard: &Shard,
    req: &Req,
    ids: impl IntoIterator<Item = Uuid>,
) -> HashMap<Uuid, Topic> {
    let mut out = HashMap::new();
    for id in ids {
        if out.contains_key(&id) {
            continue;
        }
        let t = match shard.topics.by_id(id).await {
            Ok(Some(t)) if !allowed(shard, req, op::READ, resource::TOPIC, &t.name) => Topic {
                name: Err(ErrorCode::TopicAuthorizationFailed),
                partitions: 0,
            },
            Ok(Some(t)) => Topic {
                name: Ok(t.name),
                partitions: t.partitions,
            },
            Ok(None) => Topic {
                name: Err(ErrorCode::UnknownTopicId),
                partitions: 0,
            },
            Err(e) => Topic {
                name: Err(e),
                partitions: 0,
            },
        };
        out.insert(id, t);
    }
    out
}

/// The error a partition of a resolved topic gets, if any.
pub fn partition_error(topics: &HashMap<Uuid, Topic>, key: Key) -> Option<ErrorCode> {
    match topics.get(&key.0) {
        None => Some(ErrorCode::UnknownTopicId),
        Some(Topic { name: Err(e), .. }) => Some(*e),
        Some(t) if key.1 < 0 || key.1 >= t.partitions => Some(ErrorCode::UnknownTopicOrPartition),
        Some(_) => None,
    }
}

/// Batches from the wire, bounded.
pub fn batches<'a>(
    wire: impl ExactSizeIterator<Item = (i64, i64, &'a Vec<i8>)>,
) -> Result<Batches, Refused> {
    if wire.len() > SHARE_ACK_BATCHES_MAX {
        return Err((
            ErrorCode::InvalidRequest,
            format!("at most {SHARE_ACK_BATCHES_MAX} acknowledgement batches per partition"),
        ));
    }
    Ok(wire.map(|(f, l, t)| (f, l, t.clone())).collect())
}

/// Applies a member's acknowledgements to one share-partition: its
/// answer (None, or the error and message).
pub async fn acknowledge(
    shard: &Shard,
    group: &str,
    member: &str,
    key: Key,
    batches: &Batches,
    rules: &Rules,
) -> (ErrorCode, Option<String>) {
    let result = change(&shard.agent.meta, group, key, None, |p, ends| {
        p.expire(ends.now_ms, rules);
        match p.acknowledge(member, batches, rules) {
            Ok(()) => (Ok(()), true),
            Err(e) => (Err(e), false),
        }
    })
    .await;
    let (code, message) = match result {
        Ok(Changed::Done(Ok(()))) => return (ErrorCode::None, None),
        Ok(Changed::Done(Err((code, message)))) => (code, message),
        Ok(Changed::NoState) => (
            ErrorCode::InvalidRecordState,
            "the group has no records in flight in this partition".into(),
        ),
        Ok(Changed::NoPartition) => (ErrorCode::UnknownTopicOrPartition, String::new()),
        Ok(Changed::NoGroup) => (ErrorCode::InvalidRecordState, "no such share group".into()),
        Ok(Changed::Busy) => (
            ErrorCode::InvalidRecordState,
            "the share-partition changed too often to acknowledge; try again".into(),
        ),
        Err(e) => (e, String::new()),
    };
    shard
        .metrics
        .share_acknowledgements_refused
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::debug!(group, member, topic = %key.0, partition = key.1, error = ?code, %message, "acknowledgement refused");
    (code, Some(message).filter(|m| !m.is_empty()))
}

/// A share-partition's state replaced with Kafka's persisted form at
/// `state_epoch` (the share-state APIs): the partition's answer.
pub async fn replaced(
    shard: &Shard,
    group: &str,
    key: Key,
    state_epoch: i32,
    state: crate::share::partition::SharePartition,
) -> ErrorCode {
    match crate::share::store::replace(&shard.agent.meta, group, key, state_epoch, state).await {
        Ok(Changed::Done(Ok(()))) => ErrorCode::None,
        Ok(Changed::Done(Err(e))) => e,
        Ok(Changed::NoPartition) => ErrorCode::UnknownTopicOrPartition,
        Ok(Changed::NoGroup) => ErrorCode::GroupIdNotFound,
        Ok(Changed::NoState | Changed::Busy) => ErrorCode::CoordinatorLoadInProgress,
        Err(e) => e,
    }
}

/// The share-group offset APIs' first step: `operation` on the group, and
/// the group an empty share group (made so when `create` and no group has
/// the id): Kafka's error and message otherwise.
pub async fn empty_share_group(
    shard: &Shard,
    req: &Req,
    operation: i8,
    group_id: &str,
    create: bool,
) -> Result<(), (ErrorCode, &'static str)> {
    let groups = super::group_coordinator(shard, req, operation, group_id).map_err(|e| (e, ""))?;
    match groups.share_empty(group_id.to_owned(), create).await {
        ErrorCode::None => Ok(()),
        ErrorCode::NonEmptyGroup => Err((ErrorCode::NonEmptyGroup, "The group is not empty.")),
        ErrorCode::GroupIdNotFound => Err((
            ErrorCode::GroupIdNotFound,
            "The group is not a share group or does not exist.",
        )),
        e => Err((e, "")),
    }
}

/// A topic an offset API names, resolved: its record, `Err` when the
/// caller may not `operation` it (TOPIC_AUTHORIZATION_FAILED).
pub async fn named_topic(
    shard: &Shard,
    req: &Req,
    operation: i8,
    name: &str,
) -> Result<Option<rutomq_meta::TopicRecord>, ErrorCode> {
    if !allowed(shard, req, operation, resource::TOPIC, name) {
        return Err(ErrorCode::TopicAuthorizationFailed);
    }
    Ok(shard.topics.by_name(name).await.ok().flatten())
}

/// The share-state APIs' check of each partition: CLUSTER_ACTION, and a
/// group id.
pub fn state_refusal(authorized: bool, group: &str) -> Option<ErrorCode> {
    if !authorized {
        Some(ErrorCode::ClusterAuthorizationFailed)
    } else if group.is_empty() {
        Some(ErrorCode::InvalidRequest)
    } else {
        None
    }
}
