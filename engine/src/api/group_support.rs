//! What the group handlers share: finding the coordinator of a group id,
//! the operations a group allows, and resolving the offsets of a commit
//! (OffsetCommit and TxnOffsetCommit).

use std::collections::{HashMap, HashSet};

use rutomq_meta::groups::OffsetCommit;
use rutomq_meta::TopicRecord;
use uuid::Uuid;

use super::access::{allowed, operations};
use super::Req;
use crate::error::ErrorCode;
use crate::groups::{Groups, Written};
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// A described group's `authorized_operations`: Kafka fills them in (when
/// asked) for a group answered without an error, else "not given".
pub fn group_operations(
    shard: &Shard,
    req: &Req,
    asked: bool,
    group_id: &str,
    answered: ErrorCode,
) -> i32 {
    if answered == ErrorCode::None {
        operations(shard, req, asked, resource::GROUP, group_id)
    } else {
        i32::MIN
    }
}

/// The group coordinator, if the request's principal may do `operation` on
/// group `group_id` (GROUP_AUTHORIZATION_FAILED, checked first as Kafka
/// does) and this agent coordinates it: INVALID_GROUP_ID for an empty id,
/// NOT_COORDINATOR when another agent coordinates it.
pub fn group_coordinator<'a>(
    shard: &'a Shard,
    req: &Req,
    operation: i8,
    group_id: &str,
) -> Result<&'a Groups, ErrorCode> {
    if !allowed(shard, req, operation, resource::GROUP, group_id) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    // PostgreSQL text cannot hold NUL: such ids are refused, not stored.
    if group_id.is_empty() || group_id.contains('\0') {
        return Err(ErrorCode::InvalidGroupId);
    }
    if !shard.agent.owns_group(group_id) {
        return Err(ErrorCode::NotCoordinator);
    }
    Ok(shard.agent.groups())
}

/// One partition of an OffsetCommit or TxnOffsetCommit as the client asked.
pub struct AskedOffset<'a> {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<&'a str>,
}

/// How a request names a topic: by name, or by id (OffsetCommit and
/// OffsetFetch from version 10, KIP-848).
#[derive(Clone, Copy, Debug)]
pub enum TopicRef<'a> {
    Name(&'a str),
    Id(Uuid),
}

impl<'a> TopicRef<'a> {
    /// The topic, when the principal may READ it: by name, checked before
    /// it is looked up (an unauthorized client learns nothing of it); by
    /// id, once found (UNKNOWN_TOPIC_ID when it is not).
    pub async fn readable(
        self,
        shard: &Shard,
        req: &Req,
    ) -> Result<Option<TopicRecord>, ErrorCode> {
        match self {
            TopicRef::Name(name) if allowed(shard, req, op::READ, resource::TOPIC, name) => {
                shard.topics.by_name(name).await
            }
            TopicRef::Name(_) => Err(ErrorCode::TopicAuthorizationFailed),
            TopicRef::Id(id) => match shard.topics.by_id(id).await? {
                Some(rec) if allowed(shard, req, op::READ, resource::TOPIC, &rec.name) => {
                    Ok(Some(rec))
                }
                Some(_) => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicId),
            },
        }
    }
}

/// A requested partition: (topic index, partition, error known before the
/// commit, or the key the coordinator writes).
type Asked = (usize, i32, Option<ErrorCode>, Option<(Uuid, i32)>);

/// The offsets of a commit request, resolved against the topics: what to
/// write (each partition once; one named twice gets its last offset) and
/// every asked partition's place in the answer.
pub struct ResolvedOffsets {
    asked: Vec<Asked>,
    topics: usize,
    pub offsets: Vec<OffsetCommit>,
    /// The names of the topics in `offsets`, by id.
    pub names: HashMap<Uuid, String>,
}

/// Resolves `topics` (name or id, and asked partitions, in request order):
/// topics the principal may not read, unknown topics and partitions, and metadata over `metadata_max` bytes,
/// are answered now; the rest is to be written.
pub async fn resolve_offsets<'a>(
    shard: &Shard,
    req: &Req,
    metadata_max: usize,
    topics: impl IntoIterator<Item = (TopicRef<'a>, Vec<AskedOffset<'a>>)>,
) -> ResolvedOffsets {
    let mut asked: Vec<Asked> = Vec::new();
    let mut offsets: HashMap<(Uuid, i32), OffsetCommit> = HashMap::new();
    let mut names: HashMap<Uuid, String> = HashMap::new();
    let mut n = 0;
    for (ti, (topic, partitions)) in topics.into_iter().enumerate() {
        n = ti + 1;
        // Kafka: READ on each topic.
        let topic = topic.readable(shard, req).await;
        for p in partitions {
            let code = match &topic {
                Err(e) => Some(*e),
                Ok(Some(rec)) if p.partition >= 0 && p.partition < rec.partitions => {
                    if p.metadata.is_some_and(|m| m.len() > metadata_max) {
                        Some(ErrorCode::OffsetMetadataTooLarge)
                    } else {
                        let key = (rec.topic_id, p.partition);
                        names
                            .entry(rec.topic_id)
                            .or_insert_with(|| rec.name.clone());
                        offsets.insert(
                            key,
                            OffsetCommit {
                                topic_id: rec.topic_id,
                                partition: p.partition,
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata: Some(
                                    p.metadata.map_or(Vec::new(), |m| m.as_bytes().to_vec()),
                                ),
                            },
                        );
                        asked.push((ti, p.partition, None, Some(key)));
                        continue;
                    }
                }
                Ok(_) => Some(ErrorCode::UnknownTopicOrPartition),
            };
            asked.push((ti, p.partition, code, None));
        }
    }
    ResolvedOffsets {
        asked,
        topics: n,
        offsets: offsets.into_values().collect(),
        names,
    }
}

impl ResolvedOffsets {
    /// Nothing resolved: the request was refused before its partitions
    /// were looked at.
    pub fn none() -> ResolvedOffsets {
        ResolvedOffsets {
            asked: Vec::new(),
            topics: 0,
            offsets: Vec::new(),
            names: HashMap::new(),
        }
    }

    /// Nothing was asked (or nothing looked at).
    pub fn is_empty(&self) -> bool {
        self.asked.is_empty()
    }

    /// Every asked partition's error once the coordinator answered
    /// `written`, per topic in request order: (partition, error).
    pub fn answers(self, written: Written) -> Vec<Vec<(i32, ErrorCode)>> {
        let written: Result<HashSet<(Uuid, i32)>, ErrorCode> =
            written.map(|w| w.into_iter().collect());
        let mut out = vec![Vec::new(); self.topics];
        for (ti, partition, code, key) in self.asked {
            let code = code.unwrap_or_else(|| match (&written, key) {
                (Err(e), _) => *e,
                (Ok(w), Some(k)) if w.contains(&k) => ErrorCode::None,
                // The partition went away while committing.
                _ => ErrorCode::UnknownTopicOrPartition,
            });
            out[ti].push((partition, code));
        }
        out
    }
}

/// Assigned partitions with their topic names, as the describe APIs list
/// them: (topic id, name, partitions); a topic deleted meanwhile is named "".
pub async fn named_partitions(
    shard: &Shard,
    p: &crate::groups::consumer::Partitions,
) -> Vec<(Uuid, String, Vec<i32>)> {
    let mut topics = Vec::with_capacity(p.len());
    for (id, ps) in crate::groups::consumer::to_wire(p) {
        let name = match shard.topics.by_id(id).await {
            Ok(Some(t)) => t.name,
            _ => String::new(),
        };
        topics.push((id, name, ps));
    }
    topics
}
