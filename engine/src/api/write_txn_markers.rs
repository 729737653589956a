//! WriteTxnMarkers (key 27), as `kafka-transactions.sh abort` uses it: an
//! ABORT for a producer's open transaction. In Kafka the coordinator sends
//! this to each partition leader and an operator sends it to end a hanging
//! transaction in one partition. rutomq has no hanging transactions and
//! never ends a transaction in part of its partitions: an abort ends the
//! producer's whole open transaction through its coordinator (fenced, as a
//! timeout does), in one PostgreSQL transaction; a producer with none open
//! is answered NONE (the abort already happened). COMMIT markers are only
//! written by EndTxn and are refused here.

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ApiKey, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use rutomq_meta::txn::TxnState;

use super::access::cluster_allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::txns;

/// WriteTxnMarkers, version 1 (v0 was removed in Kafka 4.0; v2 carries
/// KIP-890's transaction version).
pub const API: Api<WriteTxnMarkersRequest> = Api::new(ApiKey::WriteTxnMarkers, 1, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let mut results = Vec::with_capacity(body.markers.len());
    // Kafka: CLUSTER_ACTION on the cluster.
    let authorized = cluster_allowed(shard, req, op::CLUSTER_ACTION);
    for m in body.markers {
        let code = if !authorized {
            ErrorCode::ClusterAuthorizationFailed
        } else if m.transaction_result {
            tracing::info!(
                producer_id = m.producer_id.0,
                "WriteTxnMarkers refused: COMMIT markers are written by EndTxn only"
            );
            ErrorCode::InvalidRequest
        } else {
            abort(shard, m.producer_id.0).await
        };
        let topics = m
            .topics
            .into_iter()
            .map(|t| {
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partition_indexes
                            .into_iter()
                            .map(|p| {
                                WritableTxnMarkerPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_error_code(code.code())
                            })
                            .collect(),
                    )
            })
            .collect();
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}

async fn abort(shard: &Shard, producer_id: i64) -> ErrorCode {
    let meta = &shard.agent.meta;
    let open = meta
        .txn_list(
            Some(vec![TxnState::Ongoing.name().to_owned()]),
            Some(vec![producer_id]),
            1,
        )
        .await;
    let id = match open {
        Ok(mut l) => match l.pop() {
            Some((id, ..)) => id,
            None => return ErrorCode::None,
        },
        Err(e) => {
            tracing::warn!(error = %e, "WriteTxnMarkers lookup failed");
            return ErrorCode::CoordinatorNotAvailable;
        }
    };
    match meta
        .txn_apply(id.clone(), true, false, move |found| {
            txns::operator_abort(producer_id, found)
        })
        .await
    {
        Ok(aborted) => {
            if aborted {
                shard
                    .agent
                    .txn_stats
                    .count(&shard.agent.txn_stats.operator_aborts);
            }
            tracing::info!(
                producer_id,
                transactional_id = %String::from_utf8_lossy(&id).escape_debug(),
                aborted,
                "WriteTxnMarkers: operator abort"
            );
            ErrorCode::None
        }
        Err(e) => {
            tracing::warn!(error = %e, "WriteTxnMarkers abort failed");
            ErrorCode::CoordinatorNotAvailable
        }
    }
}
