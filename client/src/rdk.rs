//! The rdkafka backends: librdkafka through the `rdkafka` crate.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::error::{Error, Result};
use crate::producer::{Delivery, ProducerRecord, RecordMetadata};
use crate::settings::{KafkaProducerSettings, Security};
use crate::Compression;

/// How long `send` waits before trying again when librdkafka's queue is
/// full (its `queue.buffering.max.*` bounds).
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(5);

pub struct RdProducer {
    inner: FutureProducer,
}

impl RdProducer {
    pub fn new(s: &KafkaProducerSettings) -> Result<RdProducer> {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &s.bootstrap_servers)
            .set("client.id", &s.client_id)
            .set("acks", s.acks.code().to_string())
            // Java's placement for keyed records, as the native producer
            // (librdkafka's own default hashes keys with CRC32).
            .set("partitioner", "murmur2_random")
            .set(
                "compression.type",
                match s.compression {
                    Compression::None => "none",
                    Compression::Gzip => "gzip",
                    Compression::Snappy => "snappy",
                    Compression::Lz4 => "lz4",
                    Compression::Zstd => "zstd",
                },
            )
            .set("linger.ms", s.linger.as_millis().to_string())
            .set("batch.size", s.batch_size_bytes.to_string())
            .set("message.max.bytes", s.max_request_size_bytes.to_string())
            .set(
                "max.in.flight.requests.per.connection",
                s.max_in_flight_requests_per_connection.to_string(),
            )
            .set("retries", s.retries.to_string())
            .set("retry.backoff.ms", s.retry_backoff.as_millis().to_string())
            .set(
                "request.timeout.ms",
                s.request_timeout.as_millis().to_string(),
            )
            .set(
                "delivery.timeout.ms",
                s.delivery_timeout.as_millis().to_string(),
            )
            .set(
                "queue.buffering.max.kbytes",
                (s.buffer_memory_bytes / 1024).max(1).to_string(),
            );
        match s.security {
            Security::Plaintext => {
                c.set("security.protocol", "plaintext");
            }
        }
        for (k, v) in &s.rdkafka_properties {
            c.set(k, v);
        }
        Ok(RdProducer { inner: c.create()? })
    }

    pub async fn send(&self, r: ProducerRecord) -> Result<Delivery> {
        let topic = r.topic.clone();
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (k, v) in &r.headers {
            headers = headers.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        loop {
            let mut rec: FutureRecord<'_, [u8], [u8]> =
                FutureRecord::to(&topic).headers(headers.clone());
            if let Some(k) = r.key.as_deref() {
                rec = rec.key(k);
            }
            if let Some(v) = r.value.as_deref() {
                rec = rec.payload(v);
            }
            if let Some(p) = r.partition {
                rec = rec.partition(p);
            }
            if let Some(ts) = r.timestamp_ms {
                rec = rec.timestamp(ts);
            }
            match self.inner.send_result(rec) {
                Ok(fut) => {
                    let topic = topic.clone();
                    return Ok(Delivery::new(async move {
                        match fut.await {
                            Ok(Ok(d)) => Ok(RecordMetadata {
                                topic,
                                partition: d.partition,
                                offset: d.offset,
                                timestamp_ms: d.timestamp.to_millis().unwrap_or(-1),
                            }),
                            Ok(Err((e, _))) => Err(Error::from(e)),
                            Err(_) => Err(Error::Closed),
                        }
                    }));
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(QUEUE_FULL_WAIT).await;
                }
                Err((e, _)) => return Err(Error::from(e)),
            }
        }
    }

    pub async fn flush(&self) -> Result<()> {
        let p = self.inner.clone();
        tokio::task::spawn_blocking(move || p.flush(rdkafka::util::Timeout::Never))
            .await
            .map_err(|_| Error::Closed)??;
        Ok(())
    }
}
