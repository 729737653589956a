//! CreateDelegationToken (key 38): a token for the requester, or (v3) for
//! another owner when the requester may CREATE_TOKENS for that user.

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, CreateDelegationTokenRequest, CreateDelegationTokenResponse,
};
use rutomq_meta::token::TokenCreateError;

use super::access::allowed as acl_allowed;
use super::token_support::{allowed, split};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::limits::{PRINCIPAL_NAME_BYTES_MAX, TOKEN_RENEWERS_MAX};
use crate::security::acl::{op, resource};
use crate::security::tokens::new_token;
use crate::shard::Shard;

/// CreateDelegationToken, versions 1–3.
pub const API: Api<CreateDelegationTokenRequest> = Api::new(ApiKey::CreateDelegationToken, 1, 3);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: CreateDelegationTokenRequest,
) -> CreateDelegationTokenResponse {
    let requester = req.with_principal(|p, _| p.to_owned());
    let (rt, rn) = split(&requester);
    let fail = |code: ErrorCode| {
        CreateDelegationTokenResponse::default()
            .with_error_code(code.code())
            .with_principal_type(str_bytes(rt))
            .with_principal_name(str_bytes(rn))
            .with_token_requester_principal_type(str_bytes(rt))
            .with_token_requester_principal_name(str_bytes(rn))
    };
    let cfg = match allowed(shard, req) {
        Ok(cfg) => cfg.clone(),
        Err(code) => return fail(code),
    };
    // Principals are users, as in Kafka.
    let users = body
        .renewers
        .iter()
        .map(|r| (r.principal_type.as_str(), r.principal_name.as_str()))
        .chain(
            body.owner_principal_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(|n| (body.owner_principal_type.as_deref().map_or("", |t| t), n)),
        );
    if users.clone().any(|(t, _)| t != "User") {
        return fail(ErrorCode::InvalidPrincipalType);
    }
    let too_long = users
        .clone()
        .any(|(_, n)| n.len() > PRINCIPAL_NAME_BYTES_MAX);
    if body.renewers.len() > TOKEN_RENEWERS_MAX || too_long {
        tracing::info!(client = %req.client_id(), renewers = body.renewers.len(),
            "CreateDelegationToken refused: at most {TOKEN_RENEWERS_MAX} renewers of names up to {PRINCIPAL_NAME_BYTES_MAX} bytes");
        return fail(ErrorCode::InvalidRequest);
    }
    let owner = match body
        .owner_principal_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        Some(name) => format!("User:{name}"),
        None => requester.clone(),
    };
    // Kafka: a token for someone else needs CREATE_TOKENS on that user
    // (the resource named by the principal, `User:bob`).
    if owner != requester && !acl_allowed(shard, req, op::CREATE_TOKENS, resource::USER, &owner) {
        return fail(ErrorCode::DelegationTokenAuthorizationFailed);
    }
    let renewers: Vec<String> = body
        .renewers
        .iter()
        .map(|r| format!("User:{}", r.principal_name.as_str()))
        .collect();
    let now = crate::wall::now_ms();
    let (token, mac) = new_token(
        &cfg,
        owner.clone(),
        requester.clone(),
        renewers,
        body.max_lifetime_ms,
        now,
    );
    let answer = CreateDelegationTokenResponse::default()
        .with_principal_type(str_bytes(split(&owner).0))
        .with_principal_name(str_bytes(split(&owner).1))
        .with_token_requester_principal_type(str_bytes(rt))
        .with_token_requester_principal_name(str_bytes(rn))
        .with_issue_timestamp_ms(token.issue_ms)
        .with_expiry_timestamp_ms(token.expiry_ms)
        .with_max_timestamp_ms(token.max_ms)
        .with_token_id(str_bytes(&token.token_id))
        .with_hmac(Bytes::from(mac));
    let id = token.token_id.clone();
    match shard.agent.meta.token_create(token).await {
        Ok(()) => {
            tracing::info!(token_id = %id, %owner, %requester, "delegation token created");
            if let Err(e) = shard.agent.tokens.reload(&shard.agent.meta).await {
                tracing::warn!(error = %e, "token stored, but cannot reload the tokens (the refresher will)");
            }
            answer
        }
        Err(e @ TokenCreateError::TooMany) => {
            tracing::warn!("CreateDelegationToken refused: {e}");
            fail(ErrorCode::InvalidRequest)
        }
        Err(TokenCreateError::Meta(e)) => fail(ErrorCode::from(&e)),
    }
}
