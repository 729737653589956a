//! EndTxn (key 26): commit or abort. The markers of every partition, the
//! transaction's consumer offsets and the partitions' last stable offsets
//! are written in one PostgreSQL transaction before the answer, so a
//! committed transaction is wholly visible when EndTxn returns.

use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::txns;

/// EndTxn, versions 0–4 (v5 is KIP-890's second phase, not served: clients
/// stay on the classic protocol).
pub const API: Api<EndTxnRequest> = Api::new(ApiKey::EndTxn, 0, 4);

pub async fn handle(shard: &Shard, req: &Req, body: EndTxnRequest) -> EndTxnResponse {
    let id = body.transactional_id.0.to_string();
    let (pid, epoch, commit) = (body.producer_id.0, body.producer_epoch, body.committed);
    let code = if allowed(shard, req, op::WRITE, resource::TRANSACTIONAL_ID, &id) {
        let changed = txns::coordinated(&shard.agent, &id, true, false, "EndTxn", move |found| {
            txns::end_txn(pid, epoch, commit, found)
        });
        txns::fenced_for(changed.await.unwrap_or_else(|e| e), req.version, 2)
    } else {
        ErrorCode::TransactionalIdAuthorizationFailed
    };
    let stats = &shard.agent.txn_stats;
    match (code, body.committed) {
        (ErrorCode::None, true) => stats.count(&stats.commits),
        (ErrorCode::None, false) => stats.count(&stats.aborts),
        _ => stats.count(&stats.refused),
    }
    if code != ErrorCode::None {
        tracing::info!(
            transactional_id = %id.escape_debug(),
            producer_id = body.producer_id.0,
            epoch = body.producer_epoch,
            commit = body.committed,
            ?code,
            "EndTxn refused"
        );
    }
    EndTxnResponse::default().with_error_code(code.code())
}
