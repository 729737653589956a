//! OffsetCommit (key 8): a group's consumed positions, validated against
//! the member's generation by the group's coordinator, then written to
//! PostgreSQL before the answer.

use kafka_protocol::messages::ApiKey;

use super::generated::offset_commit_request::OffsetCommitRequestTopic;
use super::generated::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use super::generated::{OffsetCommitRequest, OffsetCommitResponse};
use super::{group_coordinator, resolve_offsets, Api, AskedOffset, Req, TopicRef};
use crate::error::ErrorCode;
use crate::groups::CommitArgs;
use crate::security::acl::op;
use crate::shard::Shard;

/// OffsetCommit, versions 2–10 (10 names topics by id; codec generated
/// from Kafka 4.3's spec).
pub const API: Api<OffsetCommitRequest> = Api::new(ApiKey::OffsetCommit, 2, 10);

/// How the request names a topic at its version.
fn topic_ref(t: &OffsetCommitRequestTopic, version: i16) -> TopicRef<'_> {
    if version >= 10 {
        TopicRef::Id(t.topic_id)
    } else {
        TopicRef::Name(t.name.0.as_str())
    }
}

/// A response topic naming the request's topic as it was named.
fn answer_topic(t: &OffsetCommitRequestTopic) -> OffsetCommitResponseTopic {
    OffsetCommitResponseTopic::default()
        .with_name(t.name.clone())
        .with_topic_id(t.topic_id)
}

pub async fn handle(shard: &Shard, req: &Req, body: OffsetCommitRequest) -> OffsetCommitResponse {
    // Not this agent's group: NOT_COORDINATOR for every partition, before
    // anything else is looked at (the client then finds the coordinator).
    let groups = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Ok(g) => g,
        Err(e) => return fail_all(&body, e),
    };
    let asked = body.topics.iter().map(|t| {
        let parts = t.partitions.iter().map(|p| AskedOffset {
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_deref(),
        });
        (topic_ref(t, req.version), parts.collect())
    });
    let mut resolved =
        resolve_offsets(shard, req, groups.cfg.offset_metadata_bytes_max, asked).await;
    let written = if resolved.offsets.is_empty() {
        Ok(Vec::new())
    } else {
        groups
            .commit(CommitArgs {
                group_id: body.group_id.to_string(),
                member_id: body.member_id.to_string(),
                instance_id: body.group_instance_id.as_ref().map(|s| s.to_string()),
                generation: body.generation_id_or_member_epoch,
                group_must_exist: req.version >= 9,
                offsets: std::mem::take(&mut resolved.offsets),
                topic_names: std::mem::take(&mut resolved.names),
                txn: None,
            })
            .await
    };
    let topics = body
        .topics
        .iter()
        .zip(resolved.answers(written))
        .map(|(t, parts)| {
            answer_topic(t).with_partitions(
                parts
                    .into_iter()
                    .map(|(p, code)| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p)
                            .with_error_code(code.code())
                    })
                    .collect(),
            )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// Every requested partition answered with `code`.
fn fail_all(body: &OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        body.topics
            .iter()
            .map(|t| {
                answer_topic(t).with_partitions(
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
