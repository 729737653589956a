//! PushTelemetry (key 72, KIP-714): a client's metrics (OTLP, compressed
//! as it chose among those accepted), kept as the series `/metrics`
//! exports (`crate::telemetry`).

use kafka_protocol::messages::{ApiKey, PushTelemetryRequest, PushTelemetryResponse};

use super::get_telemetry_subscriptions::client_attrs;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;
use crate::telemetry::Push;

/// PushTelemetry, version 0.
pub const API: Api<PushTelemetryRequest> = Api::new(ApiKey::PushTelemetry, 0, 0);

pub async fn handle(shard: &Shard, req: &Req, body: PushTelemetryRequest) -> PushTelemetryResponse {
    let attrs = client_attrs(req);
    let push = Push {
        instance: body.client_instance_id,
        subscription_id: body.subscription_id,
        terminating: body.terminating,
        compression: body.compression_type,
        payload: &body.metrics,
    };
    let instance = push.instance;
    let (code, why) = shard.configs.with(&shard.agent.dynamic.copy, |c| {
        shard
            .agent
            .telemetry
            .push(c.subscriptions(), attrs, push, crate::wall::now_ms())
    });
    if code != ErrorCode::None {
        tracing::debug!(client = %req.client_id(), %instance, error = ?code, reason = why.as_deref().unwrap_or(""),
            "telemetry push refused");
    }
    PushTelemetryResponse::default().with_error_code(code.code())
}
