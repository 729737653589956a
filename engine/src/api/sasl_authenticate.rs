//! SaslAuthenticate (key 36): one token of the SASL exchange chosen by
//! SaslHandshake v1; and the bare tokens that follow SaslHandshake v0
//! ([`raw_token`]). A failed exchange is answered after
//! `AUTH_FAILURE_DELAY` and ends the connection.

use bytes::{BufMut, Bytes, BytesMut};
use futures::FutureExt;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
use rutomq_shards::Reply;

use super::{str_bytes, Api, Connection, MaybeLast, Req};
use crate::error::ErrorCode;
use crate::limits::AUTH_FAILURE_DELAY;
use crate::security::session::TokenOutcome;
use crate::shard::Shard;

/// SaslAuthenticate, versions 0–2.
pub const API: Api<SaslAuthenticateRequest> = Api::new(ApiKey::SaslAuthenticate, 0, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: SaslAuthenticateRequest,
) -> MaybeLast<SaslAuthenticateResponse> {
    let resp = SaslAuthenticateResponse::default().with_error_message(None);
    let Some(conn) = &req.conn else {
        return MaybeLast::closing(
            resp.with_error_code(ErrorCode::IllegalSaslState.code()),
            Default::default(),
        );
    };
    match step(shard, conn, &body.auth_bytes) {
        TokenOutcome::Continue(challenge) => {
            MaybeLast::open(resp.with_auth_bytes(challenge.into()))
        }
        // KIP-368: the client re-authenticates before this many ms (0: never).
        TokenOutcome::Done { last, .. } => MaybeLast::open(
            resp.with_auth_bytes(last.into())
                .with_session_lifetime_ms(conn.auth.borrow().session_left_ms()),
        ),
        TokenOutcome::Failed { message, .. } => MaybeLast::closing(
            resp.with_error_code(ErrorCode::SaslAuthenticationFailed.code())
                .with_error_message(Some(str_bytes(&message))),
            AUTH_FAILURE_DELAY,
        ),
        TokenOutcome::IllegalState => MaybeLast::closing(
            resp.with_error_code(ErrorCode::IllegalSaslState.code())
                .with_error_message(Some(str_bytes(
                    "SaslAuthenticate not expected now: send SaslHandshake first",
                ))),
            Default::default(),
        ),
    }
}

/// A bare token after SaslHandshake v0: the answer is a bare size-prefixed
/// token; a failure closes the connection without one (the v0 protocol
/// has no way to say why).
pub fn raw_token(shard: &Shard, conn: &Connection, token: &Bytes) -> Reply {
    match step(shard, conn, token) {
        TokenOutcome::Continue(b) | TokenOutcome::Done { last: b, .. } => {
            let mut out = BytesMut::with_capacity(4 + b.len());
            out.put_i32(b.len() as i32);
            out.put_slice(&b);
            Reply::Now(Some(out.freeze().into()))
        }
        TokenOutcome::Failed { .. } => Reply::Last(
            async {
                rutomq_shards::sleep(AUTH_FAILURE_DELAY).await;
                None
            }
            .boxed_local(),
        ),
        TokenOutcome::IllegalState => Reply::Last(async { None }.boxed_local()),
    }
}

/// Runs one token through the connection's exchange, counting and logging
/// how it ended.
fn step(shard: &Shard, conn: &Connection, token: &[u8]) -> TokenOutcome {
    let (mechanism, renewing) = {
        let auth = conn.auth.borrow();
        (
            auth.mechanism().map_or("", |m| m.name()),
            auth.reauthenticating(),
        )
    };
    let tokens = shard.agent.tokens.copy.get();
    let outcome = conn.auth.borrow_mut().token(
        token,
        &shard.agent.credentials,
        &tokens,
        shard.agent.security.reauth,
    );
    match &outcome {
        TokenOutcome::Done { principal, .. } => {
            let counter = if renewing {
                &shard.metrics.sasl_reauthentications
            } else {
                &shard.metrics.sasl_authentications
            };
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(%principal, mechanism, peer = ?conn.peer, renewing, "authenticated");
        }
        TokenOutcome::Failed { message, user } => {
            shard.auth_failed(user.as_deref(), conn.peer, mechanism, message);
        }
        _ => {}
    }
    outcome
}
