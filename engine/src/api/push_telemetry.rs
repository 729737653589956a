//! PushTelemetry (key 72, KIP-714): a client's metrics (OTLP, compressed
//! as it chose among those accepted), kept as the series `/metrics`
//! exports (`crate::telemetry`), and, with `--client-telemetry-topic`,
//! written into that topic.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use kafka_protocol::messages::{ApiKey, PushTelemetryRequest, PushTelemetryResponse};
use uuid::Uuid;

use super::get_telemetry_subscriptions::client_attrs;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::records::one_record_batch;
use crate::shard::Shard;
use crate::telemetry::{ClientAttrs, Push};
use crate::topics;

/// PushTelemetry, version 0.
pub const API: Api<PushTelemetryRequest> = Api::new(ApiKey::PushTelemetry, 0, 0);

pub async fn handle(
    shard: &Rc<Shard>,
    req: &Req,
    body: PushTelemetryRequest,
) -> PushTelemetryResponse {
    let attrs = client_attrs(req);
    let push = Push {
        instance: body.client_instance_id,
        subscription_id: body.subscription_id,
        terminating: body.terminating,
        compression: body.compression_type,
        payload: &body.metrics,
    };
    let instance = push.instance;
    let now_ms = crate::wall::now_ms();
    let taken = shard.configs.with(&shard.agent.dynamic.copy, |c| {
        shard
            .agent
            .telemetry
            .push(c.subscriptions(), &attrs, push, now_ms)
    });
    let code = match taken {
        Ok(otlp) => {
            if let Some(topic) = &shard.agent.cfg.client_telemetry_topic {
                export(shard, topic, instance, &attrs, otlp, now_ms).await;
            }
            ErrorCode::None
        }
        Err((code, why)) => {
            tracing::debug!(client = %req.client_id(), %instance, error = ?code, reason = %why,
                "telemetry push refused");
            code
        }
    };
    PushTelemetryResponse::default().with_error_code(code.code())
}

/// Writes a push's metrics into `topic` as the agent's own record, and
/// waits until it is durable: key the client instance id, value the OTLP
/// `ExportMetricsServiceRequest` decompressed (what an OpenTelemetry
/// collector's Kafka receiver reads as `otlp_proto`), headers the client's
/// id and software. One client's pushes go to one partition, in order.
/// The client's push is answered as taken either way (its metrics are on
/// `/metrics`); a failure is counted and logged.
async fn export(
    shard: &Rc<Shard>,
    topic: &str,
    instance: Uuid,
    attrs: &ClientAttrs,
    otlp: Vec<u8>,
    now_ms: i64,
) {
    let stats = &shard.agent.telemetry.stats;
    let failed = |why: &str| {
        stats.export_failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%topic, %instance, reason = %why, "client telemetry not written to its topic");
    };
    let rec = match shard.topics.by_name(topic).await {
        Ok(Some(rec)) => rec,
        Ok(None) => return failed("the topic does not exist"),
        Err(code) => return failed(&format!("{code:?}")),
    };
    let key = instance.to_string();
    let headers: [(&str, &[u8]); 3] = [
        ("client_id", attrs.client_id.as_bytes()),
        ("client_software_name", attrs.software_name.as_bytes()),
        ("client_software_version", attrs.software_version.as_bytes()),
    ];
    // The topic's demands on a record: its timestamp type and size bound
    // (the agent's own record has a key and the agent's time, so it meets
    // the rest).
    let ((_, stamp), max_bytes) = shard.configs.with(&shard.agent.dynamic.copy, |c| {
        let d = c.topic_defaults();
        (
            topics::record_rules(&rec, d, now_ms),
            topics::max_message_bytes(&rec, d),
        )
    });
    let (batch, info) = one_record_batch(key.as_bytes(), &otlp, &headers, now_ms, stamp);
    if batch.len() > max_bytes {
        return failed(&format!(
            "a record of {} bytes is over the topic's max.message.bytes {max_bytes}",
            batch.len()
        ));
    }
    let partition = (crc32c::crc32c(instance.as_bytes()) % rec.partitions.max(1) as u32) as i32;
    let (done, part, index) = shard.buffer.append(rec.topic_id, partition, batch, &info);
    shard.buffer.appended();
    match done.await {
        Ok(Ok(outcome)) => match outcome[part].batches[index] {
            rutomq_meta::BatchOutcome::Appended { .. } => {
                stats.exported.fetch_add(1, Ordering::Relaxed);
            }
            other => failed(&format!("{other:?}")),
        },
        Ok(Err(code)) => failed(&format!("{code:?}")),
        Err(_) => failed("the agent is stopping"),
    }
}
