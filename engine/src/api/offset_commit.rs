//! OffsetCommit (key 8): a group's consumed positions, validated against
//! the member's generation by the group's coordinator, then written to
//! PostgreSQL before the answer.

use std::collections::HashMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};
use rutomq_meta::groups::OffsetCommit;
use uuid::Uuid;

use super::{Api, group_coordinator, Req};
use crate::error::ErrorCode;
use crate::groups::CommitArgs;
use crate::shard::Shard;

/// A requested partition: (topic index, partition, error known before the
/// commit, or the key the coordinator writes).
type Asked = (usize, i32, Option<ErrorCode>, Option<(Uuid, i32)>);

/// OffsetCommit, versions 2–9.
pub const API: Api<OffsetCommitRequest> = Api::new(ApiKey::OffsetCommit, 2, 9);

pub async fn handle(shard: &Shard, req: &Req, body: OffsetCommitRequest) -> OffsetCommitResponse {
    // Each requested partition's answer, in request order; `None` until the
    // coordinator has written it.
    let mut answers: Vec<Asked> = Vec::new();
    let mut offsets: HashMap<(Uuid, i32), OffsetCommit> = HashMap::new();
    // Not this agent's group: NOT_COORDINATOR for every partition, before
    // anything else is looked at (the client then finds the coordinator).
    let groups = match group_coordinator(shard, &body.group_id) {
        Ok(g) => g,
        Err(e) => return fail_all(&body, e),
    };
    let metadata_max = groups.cfg.offset_metadata_bytes_max;
    for (ti, t) in body.topics.iter().enumerate() {
        let topic = shard.topics.by_name(t.name.0.as_str()).await;
        for p in &t.partitions {
            let code = match &topic {
                Err(e) => Some(*e),
                Ok(None) => Some(ErrorCode::UnknownTopicOrPartition),
                Ok(Some(rec)) if p.partition_index < 0 || p.partition_index >= rec.partitions => {
                    Some(ErrorCode::UnknownTopicOrPartition)
                }
                Ok(Some(_))
                    if p.committed_metadata
                        .as_ref()
                        .is_some_and(|m| m.len() > metadata_max) =>
                {
                    Some(ErrorCode::OffsetMetadataTooLarge)
                }
                Ok(Some(rec)) => {
                    let key = (rec.topic_id, p.partition_index);
                    // A partition named twice: the last offset wins.
                    offsets.insert(
                        key,
                        OffsetCommit {
                            topic_id: rec.topic_id,
                            partition: p.partition_index,
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata: Some(
                                p.committed_metadata
                                    .as_ref()
                                    .map_or(Vec::new(), |m| m.as_bytes().to_vec()),
                            ),
                        },
                    );
                    answers.push((ti, p.partition_index, None, Some(key)));
                    continue;
                }
            };
            answers.push((ti, p.partition_index, code, None));
        }
    }
    let written = if offsets.is_empty() {
        Ok(Vec::new())
    } else {
        groups
            .commit(CommitArgs {
                group_id: body.group_id.to_string(),
                member_id: body.member_id.to_string(),
                instance_id: body.group_instance_id.as_ref().map(|s| s.to_string()),
                generation: body.generation_id_or_member_epoch,
                group_must_exist: req.version >= 9,
                offsets: offsets.into_values().collect(),
                txn: None,
            })
            .await
    };
    let written: Result<std::collections::HashSet<(Uuid, i32)>, ErrorCode> =
        written.map(|w| w.into_iter().collect());
    let mut topics: Vec<OffsetCommitResponseTopic> = body
        .topics
        .iter()
        .map(|t| OffsetCommitResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (ti, partition, code, key) in answers {
        let code = code.unwrap_or_else(|| match (&written, key) {
            (Err(e), _) => *e,
            (Ok(w), Some(k)) if w.contains(&k) => ErrorCode::None,
            // The partition went away while committing.
            _ => ErrorCode::UnknownTopicOrPartition,
        });
        topics[ti].partitions.push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code.code()),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// Every requested partition answered with `code`.
fn fail_all(body: &OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        body.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code.code())
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}
