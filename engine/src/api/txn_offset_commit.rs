//! TxnOffsetCommit (key 28): a transaction's consumed positions, sent to
//! the group's coordinator. The member's generation is checked as for
//! OffsetCommit (KIP-447: a zombie of an earlier generation is refused);
//! the offsets wait in PostgreSQL until EndTxn, which applies or drops
//! them with the transaction's markers.

use super::access::allowed;
use super::{group_coordinator, resolve_offsets, Api, AskedOffset, Req, ResolvedOffsets, TopicRef};
use crate::error::ErrorCode;
use crate::groups::{CommitArgs, TxnTarget};
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

/// TxnOffsetCommit, versions 0–4 (v5 is KIP-890's second phase).
pub const API: Api<TxnOffsetCommitRequest> = Api::new(ApiKey::TxnOffsetCommit, 0, 4);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let id = body.transactional_id.0.to_string();
    let asked = body.topics.iter().map(|t| {
        let parts = t.partitions.iter().map(|p| AskedOffset {
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_deref(),
        });
        (TopicRef::Name(t.name.0.as_str()), parts.collect())
    });
    // Kafka: WRITE on the transactional id, then READ on the group and on
    // each topic.
    let txn_allowed = allowed(shard, req, op::WRITE, resource::TRANSACTIONAL_ID, &id);
    let coordinator = if txn_allowed {
        group_coordinator(shard, req, op::READ, &body.group_id)
    } else {
        Err(ErrorCode::TransactionalIdAuthorizationFailed)
    };
    let (resolved, written) = match coordinator {
        Err(e) => (ResolvedOffsets::none(), Err(e)),
        Ok(_) if id.is_empty() => (ResolvedOffsets::none(), Err(ErrorCode::InvalidRequest)),
        Ok(groups) => {
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
                        generation: body.generation_id,
                        group_must_exist: false,
                        offsets: std::mem::take(&mut resolved.offsets),
                        topic_names: std::mem::take(&mut resolved.names),
                        txn: Some(TxnTarget {
                            transactional_id: id.clone().into_bytes(),
                            producer_id: body.producer_id.0,
                            producer_epoch: body.producer_epoch,
                        }),
                    })
                    .await
            };
            (resolved, written)
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
    let refused = written
        .as_ref()
        .err()
        .copied()
        .filter(|_| resolved.is_empty());
    let answers = resolved.answers(written);
    let topics = body
        .topics
        .iter()
        .enumerate()
        .map(|(ti, t)| {
            // Refused before the partitions were looked at: each one gets
            // the error.
            let parts: Vec<(i32, ErrorCode)> = match refused {
                Some(code) => t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, code))
                    .collect(),
                None => answers.get(ti).cloned().unwrap_or_default(),
            };
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, code)| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
