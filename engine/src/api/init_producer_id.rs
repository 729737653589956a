//! InitProducerId (key 22). Without a transactional id: a fresh producer id
//! at epoch 0 (idempotence). With one: the transaction coordinator's
//! answer — epoch 0 for an id never used (Flink's abort probing relies on
//! it), else the id's producer fenced by an epoch bump, its open
//! transaction aborted first.

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::access::{allowed, allowed_on_some, cluster_allowed};
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::txns::{self, InitAsk};

/// InitProducerId, versions 0–5.
pub const API: Api<InitProducerIdRequest> = Api::new(ApiKey::InitProducerId, 0, 5);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let answer = match &body.transactional_id {
        // Kafka: an idempotent producer needs IDEMPOTENT_WRITE on the
        // cluster, or WRITE on some topic; a transactional one WRITE on its
        // transactional id.
        None if !allowed_on_some(shard, req, op::WRITE, resource::TOPIC)
            && !cluster_allowed(shard, req, op::IDEMPOTENT_WRITE) =>
        {
            Err(ErrorCode::ClusterAuthorizationFailed)
        }
        Some(id) if !allowed(shard, req, op::WRITE, resource::TRANSACTIONAL_ID, id) => {
            Err(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        // Without a transactional id Kafka always hands out a fresh
        // producer id (epoch 0), also when the client names its current id
        // and epoch (KIP-360 recovery): its sequences then restart at 0
        // under the new id.
        None => shard
            .agent
            .meta
            .next_producer_id()
            .await
            .map(|id| (id, 0))
            .map_err(|e| ErrorCode::from(&e)),
        Some(id) => transactional(shard, req, &body, id.0.to_string()).await,
    };
    match answer {
        Ok((pid, epoch)) => resp
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch),
        Err(code) => resp.with_error_code(txns::fenced_for(code, req.version, 4).code()),
    }
}

async fn transactional(
    shard: &Shard,
    req: &Req,
    body: &InitProducerIdRequest,
    id: String,
) -> Result<(i64, i16), ErrorCode> {
    let max = shard.agent.cfg.transaction_max_timeout_ms;
    let timeout = body.transaction_timeout_ms;
    if timeout <= 0 || timeout > max {
        tracing::info!(
            transactional_id = %id.escape_debug(),
            timeout_ms = timeout,
            max_timeout_ms = max,
            "InitProducerId refused: transaction.timeout.ms must be in 1..=transaction.max.timeout.ms (raise it with --transaction-max-timeout-ms)"
        );
        return Err(ErrorCode::InvalidTransactionTimeout);
    }
    let expected = match (body.producer_id.0, body.producer_epoch) {
        (-1, -1) => None,
        (pid, epoch) if pid >= 0 && epoch >= 0 && req.version >= 3 => Some((pid, epoch)),
        _ if req.version < 3 => None,
        _ => return Err(ErrorCode::InvalidRequest),
    };
    let ask = InitAsk {
        timeout_ms: timeout,
        expected,
    };
    let key = id.clone().into_bytes();
    let result = txns::coordinated(
        &shard.agent,
        &id,
        true,
        true,
        "InitProducerId",
        move |found| txns::init_producer_id(&key, ask, found),
    )
    .await
    .and_then(|r| r);
    let stats = &shard.agent.txn_stats;
    stats.count(if result.is_ok() {
        &stats.inits
    } else {
        &stats.refused
    });
    if let Ok((pid, epoch)) = result {
        tracing::debug!(transactional_id = %id.escape_debug(), producer_id = pid, epoch, "transactional producer initialised");
    }
    result
}
