//! GetTelemetrySubscriptions (key 71, KIP-714): which of its metrics a
//! client pushes and how often, from the client-metrics subscriptions
//! whose `match` selects it (`crate::telemetry`).

use kafka_protocol::messages::{
    ApiKey, GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
};

use super::{str_bytes, Api, Req};
use crate::limits::TELEMETRY_MAX_BYTES;
use crate::shard::Shard;
use crate::telemetry::{ClientAttrs, ACCEPTED_COMPRESSION};

/// GetTelemetrySubscriptions, version 0.
pub const API: Api<GetTelemetrySubscriptionsRequest> =
    Api::new(ApiKey::GetTelemetrySubscriptions, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: GetTelemetrySubscriptionsRequest,
) -> GetTelemetrySubscriptionsResponse {
    let attrs = client_attrs(req);
    let instance = body.client_instance_id;
    let answer = shard.configs.with(&shard.agent.dynamic.copy, |c| {
        shard
            .agent
            .telemetry
            .subscribe(c.subscriptions(), attrs, instance, crate::wall::now_ms())
    });
    if answer.error != crate::error::ErrorCode::None {
        tracing::debug!(client = %req.client_id(), instance = %answer.instance, error = ?answer.error,
            "telemetry subscription refused");
    }
    GetTelemetrySubscriptionsResponse::default()
        .with_error_code(answer.error.code())
        .with_client_instance_id(answer.instance)
        .with_subscription_id(answer.subscription_id)
        .with_accepted_compression_types(ACCEPTED_COMPRESSION.to_vec())
        .with_push_interval_ms(answer.push_interval_ms)
        .with_telemetry_max_bytes(TELEMETRY_MAX_BYTES)
        // Cumulative sums: what a Prometheus gauge of the last value shows.
        .with_delta_temporality(false)
        .with_requested_metrics(answer.metrics.iter().map(|m| str_bytes(m)).collect())
}

/// Who the client is, as subscriptions select on.
pub fn client_attrs(req: &Req) -> ClientAttrs {
    let (software_name, software_version) = req
        .conn
        .as_ref()
        .and_then(|c| c.software.borrow().clone())
        .unwrap_or_default();
    ClientAttrs {
        client_id: cut(
            req.client_id(),
            crate::limits::TELEMETRY_CLIENT_ID_BYTES_MAX,
        ),
        software_name,
        software_version,
        source: req.peer,
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}
