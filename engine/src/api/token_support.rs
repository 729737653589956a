//! What the delegation token APIs share: whether this connection may ask
//! for tokens at all, as Kafka decides, and the principals' forms.

use super::Req;
use crate::error::ErrorCode;
use crate::security::session::ANONYMOUS;
use crate::security::tokens::TokenConfig;
use crate::security::SecurityProtocol;
use crate::shard::Shard;

/// The token settings, or why no token request is taken here: tokens are
/// off (no secret key), or the connection is PLAINTEXT, one-way TLS, or
/// logged in with a token itself (Kafka's rules).
pub fn allowed<'a>(shard: &'a Shard, req: &Req) -> Result<&'a TokenConfig, ErrorCode> {
    let refuse = |code: ErrorCode, why: &str| {
        tracing::info!(client = %req.client_id(), api = ?req.key, "delegation token request refused: {why}");
        Err(code)
    };
    // Kafka's order: the connection first, then whether tokens are on.
    let Some(conn) = req.conn.as_ref() else {
        return refuse(ErrorCode::DelegationTokenRequestNotAllowed, "no connection");
    };
    let protocol = shard
        .agent
        .security
        .listeners
        .get(conn.listener)
        .map(|l| l.protocol);
    let anonymous = req.with_principal(|p, _| p == ANONYMOUS);
    match protocol {
        Some(SecurityProtocol::Plaintext) | None => {
            return refuse(
                ErrorCode::DelegationTokenRequestNotAllowed,
                "a PLAINTEXT connection",
            )
        }
        Some(SecurityProtocol::Ssl) if anonymous => {
            return refuse(
                ErrorCode::DelegationTokenRequestNotAllowed,
                "a one-way TLS connection",
            )
        }
        _ if conn.auth.borrow().token_authenticated() => {
            return refuse(
                ErrorCode::DelegationTokenRequestNotAllowed,
                "the connection logged in with a delegation token",
            )
        }
        _ => {}
    }
    match shard.agent.security.tokens.as_ref() {
        Some(cfg) => Ok(cfg),
        None => refuse(
            ErrorCode::DelegationTokenAuthDisabled,
            "no --delegation-token-secret-key",
        ),
    }
}

/// "User:alice" as (type, name).
pub fn split(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}
