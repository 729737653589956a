//! InitProducerId (key 22) for idempotent producers. Transactions are not
//! implemented yet: a transactional id gets a clear error.

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{Api, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;

/// InitProducerId, versions 0–5.
pub const API: Api<InitProducerIdRequest> = Api::new(ApiKey::InitProducerId, 0, 5);

pub async fn handle(
    shard: &Shard,
    _req: &Req,
    body: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if body.transactional_id.is_some() {
        // Not a fake success: transactional producers fail at init.
        return resp.with_error_code(ErrorCode::TransactionalIdAuthorizationFailed.code());
    }
    // Without a transactional id Kafka always hands out a fresh producer id
    // (epoch 0), also when the client names its current id and epoch
    // (KIP-360 recovery): its sequences then restart at 0 under the new id.
    match shard.agent.meta.next_producer_id().await {
        Ok(id) => resp.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => resp.with_error_code(ErrorCode::from(&e).code()),
    }
}
