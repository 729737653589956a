//! SaslHandshake (key 17): the client names a SASL mechanism; its tokens
//! follow in SaslAuthenticate requests (v1) or as bare frames (v0). The
//! answer lists the mechanisms served either way; a refused handshake ends
//! the connection, as in Kafka.

use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};

use super::{str_bytes, Api, MaybeLast, Req};
use crate::error::ErrorCode;
use crate::security::session::HandshakeError;
use crate::shard::Shard;

/// SaslHandshake, versions 0–1.
pub const API: Api<SaslHandshakeRequest> = Api::new(ApiKey::SaslHandshake, 0, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: SaslHandshakeRequest,
) -> MaybeLast<SaslHandshakeResponse> {
    let enabled = &shard.agent.security.sasl_mechanisms;
    let mechanisms = enabled.iter().map(|m| str_bytes(m.name())).collect();
    let resp = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
    let Some(conn) = &req.conn else {
        return MaybeLast::closing(
            resp.with_error_code(ErrorCode::IllegalSaslState.code()),
            Default::default(),
        );
    };
    let result = conn
        .auth
        .borrow_mut()
        .handshake(body.mechanism.as_str(), req.version, enabled);
    match result {
        Ok(()) => MaybeLast::open(resp),
        Err(e) => {
            let (code, why) = match e {
                HandshakeError::IllegalState => (
                    ErrorCode::IllegalSaslState,
                    "SaslHandshake not expected (no SASL on this listener, or already authenticated)",
                ),
                HandshakeError::Unsupported => {
                    (ErrorCode::UnsupportedSaslMechanism, "SASL mechanism not enabled")
                }
            };
            tracing::info!(peer = ?conn.peer, listener = %conn.listener_name,
                mechanism = %body.mechanism.as_str(), "refused SaslHandshake: {why}");
            MaybeLast::closing(resp.with_error_code(code.code()), Default::default())
        }
    }
}
