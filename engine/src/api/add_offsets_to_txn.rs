//! AddOffsetsToTxn (key 25): the group whose offsets the transaction will
//! commit (TxnOffsetCommit, sent to the group's coordinator, follows).

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::txns::{self, AddTo};

/// AddOffsetsToTxn, versions 0–4.
pub const API: Api<AddOffsetsToTxnRequest> = Api::new(ApiKey::AddOffsetsToTxn, 0, 4);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let id = body.transactional_id.0.to_string();
    let group = body.group_id.0.to_string();
    // Kafka: WRITE on the transactional id, READ on the group.
    let code = if !allowed(shard, req, op::WRITE, resource::TRANSACTIONAL_ID, &id) {
        ErrorCode::TransactionalIdAuthorizationFailed
    } else if !allowed(shard, req, op::READ, resource::GROUP, &group) {
        ErrorCode::GroupAuthorizationFailed
    } else if group.is_empty() || group.contains('\0') {
        ErrorCode::InvalidGroupId
    } else {
        let (pid, epoch) = (body.producer_id.0, body.producer_epoch);
        let add = AddTo::Group(group);
        let changed = txns::coordinated(
            &shard.agent,
            &id,
            false,
            false,
            "AddOffsetsToTxn",
            move |found| txns::add_to_txn(pid, epoch, &add, found),
        );
        txns::fenced_for(changed.await.unwrap_or_else(|e| e), req.version, 2)
    };
    if code != ErrorCode::None {
        shard.agent.txn_stats.count(&shard.agent.txn_stats.refused);
        tracing::debug!(transactional_id = %id.escape_debug(), ?code, "AddOffsetsToTxn refused");
    }
    AddOffsetsToTxnResponse::default().with_error_code(code.code())
}
