//! RenewDelegationToken (key 39) and, sharing its steps,
//! ExpireDelegationToken (key 40): the token named by its HMAC gets a new
//! expiry (never past its maximum), by its owner or a renewer.

use kafka_protocol::messages::{ApiKey, RenewDelegationTokenRequest, RenewDelegationTokenResponse};

use super::token_support::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::tokens::hmac_hash;
use crate::shard::Shard;

/// RenewDelegationToken, versions 1–2.
pub const API: Api<RenewDelegationTokenRequest> = Api::new(ApiKey::RenewDelegationToken, 1, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: RenewDelegationTokenRequest,
) -> RenewDelegationTokenResponse {
    let (code, expiry) = change(shard, req, &body.hmac, body.renew_period_ms, false).await;
    RenewDelegationTokenResponse::default()
        .with_error_code(code.code())
        .with_expiry_timestamp_ms(expiry)
}

/// Renews (`expire` false: for `period_ms`, at most the agent's expiry
/// time, which a period of 0 or less means) or expires (`period_ms` from
/// now, negative: now, deleting it) the token of `hmac`: its error code
/// and new expiry. Never past the token's maximum.
pub async fn change(
    shard: &Shard,
    req: &Req,
    hmac: &[u8],
    period_ms: i64,
    expire: bool,
) -> (ErrorCode, i64) {
    let cfg = match allowed(shard, req) {
        Ok(cfg) => cfg.clone(),
        Err(code) => return (code, -1),
    };
    let who = req.with_principal(|p, _| p.to_owned());
    let now = crate::wall::now_ms();
    let outcome = shard
        .agent
        .meta
        .token_update(hmac_hash(hmac), move |t| {
            // Kafka's order: expired first, then who asks.
            if t.expiry_ms < now || t.max_ms < now {
                return Err(ErrorCode::DelegationTokenExpired);
            }
            if t.owner != who && !t.renewers.contains(&who) {
                return Err(ErrorCode::DelegationTokenOwnerMismatch);
            }
            Ok(match (expire, period_ms) {
                (true, p) if p < 0 => None,
                (true, p) => Some(now.saturating_add(p).min(t.max_ms)),
                (false, p) if p <= 0 => Some(now.saturating_add(cfg.expiry_time_ms).min(t.max_ms)),
                (false, p) => Some(now.saturating_add(p.min(cfg.expiry_time_ms)).min(t.max_ms)),
            })
        })
        .await;
    match outcome {
        Ok(None) => (ErrorCode::DelegationTokenNotFound, -1),
        Ok(Some(Err(code))) => {
            tracing::info!(client = %req.client_id(), api = ?req.key, ?code, "delegation token change refused");
            (code, -1)
        }
        Ok(Some(Ok(expiry))) => {
            if let Err(e) = shard.agent.tokens.reload(&shard.agent.meta).await {
                tracing::warn!(error = %e, "token changed, but cannot reload the tokens (the refresher will)");
            }
            (ErrorCode::None, if expiry < 0 { now } else { expiry })
        }
        Err(e) => (ErrorCode::from(&e), -1),
    }
}
