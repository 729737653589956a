//! DescribeDelegationToken (key 41): the tokens in force of the owners
//! asked (null: all; an empty list: none, as Kafka answers — its
//! kafka-delegation-tokens --describe without --owner-principal sends one)
//! that the requester may see: its own, those it asked for or may renew,
//! those of users it may DESCRIBE_TOKENS of, and those it may DESCRIBE as
//! DELEGATION_TOKEN resources. The HMACs are recomputed from the secret.

use bytes::Bytes;
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    ApiKey, DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
};

use super::access::visible;
use super::token_support::{allowed, split};
use super::{str_bytes, Api, Req};
use crate::security::acl::{op, resource};
use crate::security::tokens::hmac;
use crate::shard::Shard;

/// DescribeDelegationToken, versions 1–3.
pub const API: Api<DescribeDelegationTokenRequest> =
    Api::new(ApiKey::DescribeDelegationToken, 1, 3);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeDelegationTokenRequest,
) -> DescribeDelegationTokenResponse {
    let cfg = match allowed(shard, req) {
        Ok(cfg) => cfg,
        Err(code) => {
            return DescribeDelegationTokenResponse::default().with_error_code(code.code())
        }
    };
    let who = req.with_principal(|p, _| p.to_owned());
    let owners: Option<Vec<String>> = body.owners.as_ref().map(|o| {
        o.iter()
            .map(|o| {
                format!(
                    "{}:{}",
                    o.principal_type.as_str(),
                    o.principal_name.as_str()
                )
            })
            .collect()
    });
    let set = shard.agent.tokens.copy.get();
    let tokens = set
        .all(crate::wall::now_ms())
        // An owner asked matches the tokens it owns or may renew.
        .filter(|t| {
            owners
                .as_ref()
                .is_none_or(|o| o.contains(&t.owner) || t.renewers.iter().any(|r| o.contains(r)))
        })
        .filter(|t| {
            t.owner == who
                || t.requester == who
                || t.renewers.contains(&who)
                || visible(shard, req, op::DESCRIBE_TOKENS, resource::USER, &t.owner)
                || visible(
                    shard,
                    req,
                    op::DESCRIBE,
                    resource::DELEGATION_TOKEN,
                    &t.token_id,
                )
        })
        .map(|t| {
            let (ot, on) = split(&t.owner);
            let (rt, rn) = split(&t.requester);
            DescribedDelegationToken::default()
                .with_principal_type(str_bytes(ot))
                .with_principal_name(str_bytes(on))
                .with_token_requester_principal_type(str_bytes(rt))
                .with_token_requester_principal_name(str_bytes(rn))
                .with_issue_timestamp(t.issue_ms)
                .with_expiry_timestamp(t.expiry_ms)
                .with_max_timestamp(t.max_ms)
                .with_token_id(str_bytes(&t.token_id))
                .with_hmac(Bytes::from(hmac(&cfg.secret, &t.token_id)))
                .with_renewers(
                    t.renewers
                        .iter()
                        .map(|r| {
                            let (ty, name) = split(r);
                            DescribedDelegationTokenRenewer::default()
                                .with_principal_type(str_bytes(ty))
                                .with_principal_name(str_bytes(name))
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeDelegationTokenResponse::default().with_tokens(tokens)
}
