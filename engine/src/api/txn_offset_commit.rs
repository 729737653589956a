//! TxnOffsetCommit (key 28): a transaction's consumed positions, sent to
//! the group's coordinator. The member's generation is checked as for
//! OffsetCommit (KIP-447: a zombie of an earlier generation is refused);
//! the offsets wait in PostgreSQL until EndTxn, which applies or drops
//! them with the transaction's markers.

use std::collections::HashMap;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use rutomq_meta::groups::OffsetCommit;
use uuid::Uuid;

use super::{group_coordinator, Api, Req};
use crate::error::ErrorCode;
use crate::groups::{CommitArgs, TxnTarget};
use crate::shard::Shard;

/// A requested partition: (topic index, partition, error known before the
/// commit, or the key the coordinator writes).
type Asked = (usize, i32, Option<ErrorCode>, Option<(Uuid, i32)>);

/// TxnOffsetCommit, versions 0–4 (v5 is KIP-890's second phase).
pub const API: Api<TxnOffsetCommitRequest> = Api::new(ApiKey::TxnOffsetCommit, 0, 4);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let mut answers: Vec<Asked> = Vec::new();
    let mut offsets: HashMap<(Uuid, i32), OffsetCommit> = HashMap::new();
    let id = body.transactional_id.0.to_string();
    let written = match group_coordinator(shard, &body.group_id) {
        Err(e) => Err(e),
        Ok(_) if id.is_empty() => Err(ErrorCode::InvalidRequest),
        Ok(groups) => {
            let metadata_max = groups.cfg.offset_metadata_bytes_max;
            for (ti, t) in body.topics.iter().enumerate() {
                let topic = shard.topics.by_name(t.name.0.as_str()).await;
                for p in &t.partitions {
                    let code = match &topic {
                        Err(e) => Some(*e),
                        Ok(Some(rec)) if p.partition_index >= 0 && p.partition_index < rec.partitions => {
                            if p.committed_metadata.as_ref().is_some_and(|m| m.len() > metadata_max) {
                                Some(ErrorCode::OffsetMetadataTooLarge)
                            } else {
                                let key = (rec.topic_id, p.partition_index);
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
                        }
                        Ok(_) => Some(ErrorCode::UnknownTopicOrPartition),
                    };
                    answers.push((ti, p.partition_index, code, None));
                }
            }
            if offsets.is_empty() {
                Ok(Vec::new())
            } else {
                groups
                    .commit(CommitArgs {
                        group_id: body.group_id.to_string(),
                        member_id: body.member_id.to_string(),
                        instance_id: body.group_instance_id.as_ref().map(|s| s.to_string()),
                        generation: body.generation_id,
                        group_must_exist: false,
                        offsets: offsets.into_values().collect(),
                        txn: Some(TxnTarget {
                            transactional_id: id.clone().into_bytes(),
                            producer_id: body.producer_id.0,
                            producer_epoch: body.producer_epoch,
                        }),
                    })
                    .await
            }
        }
    };
    // Kafka's version rules: an offset commit outside the transaction is
    // TRANSACTION_ABORTABLE for clients that know it (v4+).
    let written = written.map_err(|e| match e {
        ErrorCode::InvalidTxnState if req.version >= 4 => ErrorCode::TransactionAbortable,
        e => e,
    });
    if let Err(e) = &written {
        tracing::debug!(transactional_id = %id.escape_debug(), group = %body.group_id.as_str(), code = ?e, "TxnOffsetCommit refused");
    }
    let written: Result<std::collections::HashSet<(Uuid, i32)>, ErrorCode> =
        written.map(|w| w.into_iter().collect());
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = body
        .topics
        .iter()
        .map(|t| TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()))
        .collect();
    if answers.is_empty() {
        // Refused before looking at partitions: each one gets the error.
        for (ti, t) in body.topics.iter().enumerate() {
            for p in &t.partitions {
                answers.push((ti, p.partition_index, None, None));
            }
        }
    }
    for (ti, partition, code, key) in answers {
        let code = code.unwrap_or_else(|| match (&written, key) {
            (Err(e), _) => *e,
            (Ok(w), Some(k)) if w.contains(&k) => ErrorCode::None,
            _ => ErrorCode::UnknownTopicOrPartition,
        });
        topics[ti].partitions.push(
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code.code()),
        );
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}
