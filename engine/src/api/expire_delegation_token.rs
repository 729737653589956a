//! ExpireDelegationToken (key 40): the token named by its HMAC expires
//! after the period given (negative: at once, and is deleted).

use kafka_protocol::messages::{
    ApiKey, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
};

use super::renew_delegation_token::change;
use super::{Api, Req};
use crate::shard::Shard;

/// ExpireDelegationToken, versions 1–2.
pub const API: Api<ExpireDelegationTokenRequest> = Api::new(ApiKey::ExpireDelegationToken, 1, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ExpireDelegationTokenRequest,
) -> ExpireDelegationTokenResponse {
    let (code, expiry) = change(shard, req, &body.hmac, body.expiry_time_period_ms, true).await;
    ExpireDelegationTokenResponse::default()
        .with_error_code(code.code())
        .with_expiry_timestamp_ms(expiry)
}
