//! The rdkafka backends: librdkafka through the `rdkafka` crate.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::record::{Delivery, ProducerRecord, RecordMetadata};
use crate::settings::{KafkaProducerSettings, Security};
use crate::Compression;
use crate::Pem;

/// How long `send` waits before trying again when librdkafka's queue is
/// full (its `queue.buffering.max.*` bounds).
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(5);

/// The delivery callbacks: each record's outcome goes to its own oneshot,
/// and the sequence numbers of records not yet settled are kept, so that a
/// flush waits for the records sent before it only.
pub struct Deliveries {
    outstanding: Mutex<BTreeSet<u64>>,
    settled: tokio::sync::Notify,
}

type Opaque = Box<(u64, String, oneshot::Sender<Result<RecordMetadata>>)>;

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Opaque;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Opaque) {
        let (seq, topic, reply) = *opaque;
        let outcome = match result {
            Ok(m) => Ok(RecordMetadata {
                topic,
                partition: m.partition(),
                offset: m.offset(),
                timestamp_ms: m.timestamp().to_millis().unwrap_or(-1),
            }),
            Err((e, _)) => Err(Error::from(e.clone())),
        };
        let _ = reply.send(outcome);
        self.outstanding
            .lock()
            .expect("outstanding lock")
            .remove(&seq);
        self.settled.notify_waiters();
    }
}

/// Note: dropping it purges what librdkafka has not delivered yet (those
/// records fail); call `flush` first.
pub struct RdProducer {
    inner: ThreadedProducer<Deliveries>,
    deliveries: Arc<Deliveries>,
    seq: AtomicU64,
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
        // Pipelining without idempotence lets librdkafka reorder a
        // partition's batches on retry; with it, order holds (librdkafka
        // allows at most 5 in flight then, and needs acks=all).
        if s.max_in_flight_requests_per_connection > 1 {
            if s.max_in_flight_requests_per_connection > 5 || s.acks != crate::Acks::All {
                return Err(Error::Config(format!(
                    "the rdkafka backend keeps order with {} requests in flight only as an idempotent producer, which needs acks=all and at most 5; with acks=1 set with_max_in_flight_requests_per_connection(1)",
                    s.max_in_flight_requests_per_connection
                )));
            }
            c.set("enable.idempotence", "true");
        }
        security_properties(&mut c, &s.security);
        for (k, v) in &s.rdkafka_properties {
            c.set(k, v);
        }
        let deliveries = Deliveries {
            outstanding: Mutex::new(BTreeSet::new()),
            settled: tokio::sync::Notify::new(),
        };
        let inner: ThreadedProducer<Deliveries> = c.create_with_context(deliveries)?;
        let deliveries = inner.context().clone();
        Ok(RdProducer {
            inner,
            deliveries,
            seq: AtomicU64::new(0),
        })
    }

    pub async fn send(&self, r: ProducerRecord) -> Result<Delivery> {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (k, v) in &r.headers {
            headers = headers.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        let mut opaque: Opaque = Box::new((seq, r.topic.clone(), tx));
        self.deliveries
            .outstanding
            .lock()
            .expect("outstanding lock")
            .insert(seq);
        loop {
            let mut rec: BaseRecord<'_, [u8], [u8], Opaque> =
                BaseRecord::with_opaque_to(&r.topic, opaque).headers(headers.clone());
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
            match self.inner.send(rec) {
                Ok(()) => {
                    return Ok(Delivery::new(async move {
                        rx.await.map_err(|_| Error::Closed)?
                    }))
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    opaque = back.delivery_opaque;
                    tokio::time::sleep(QUEUE_FULL_WAIT).await;
                }
                Err((e, _)) => {
                    self.deliveries
                        .outstanding
                        .lock()
                        .expect("outstanding lock")
                        .remove(&seq);
                    return Err(Error::from(e));
                }
            }
        }
    }

    /// Waits until every record sent before this call is settled (not the
    /// ones sent meanwhile, which librdkafka's own flush would wait for).
    pub async fn flush(&self) -> Result<()> {
        let upto = self.seq.load(Ordering::Relaxed);
        loop {
            let settled = self.deliveries.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let oldest = self
                .deliveries
                .outstanding
                .lock()
                .expect("outstanding lock")
                .first()
                .copied();
            if oldest.is_none_or(|o| o > upto) {
                return Ok(());
            }
            settled.await;
        }
    }
}

/// librdkafka's names for `security`.
pub(crate) fn security_properties(c: &mut ClientConfig, security: &Security) {
    let (protocol, sasl, tls) = match security {
        Security::Plaintext => ("plaintext", None, None),
        Security::Ssl(t) => ("ssl", None, Some(t)),
        Security::SaslPlaintext(m) => ("sasl_plaintext", Some(m), None),
        Security::SaslSsl(m, t) => ("sasl_ssl", Some(m), Some(t)),
    };
    c.set("security.protocol", protocol);
    if let Some(m) = sasl {
        use crate::SaslMechanism as M;
        let (M::Plain { username, password }
        | M::ScramSha256 { username, password }
        | M::ScramSha512 { username, password }) = m;
        c.set("sasl.mechanisms", m.name())
            .set("sasl.username", username)
            .set("sasl.password", password);
    }
    if let Some(t) = tls {
        // Without a CA, librdkafka (like the native path) trusts the
        // system's certificates.
        match t.ca_pem() {
            Some(Pem::File(p)) => c.set("ssl.ca.location", p.display().to_string()),
            Some(Pem::Inline(pem)) => c.set("ssl.ca.pem", pem),
            None => c,
        };
        if let Some((chain, key)) = t.client_cert_pem() {
            match chain {
                Pem::File(p) => c.set("ssl.certificate.location", p.display().to_string()),
                Pem::Inline(pem) => c.set("ssl.certificate.pem", pem),
            };
            match key {
                Pem::File(p) => c.set("ssl.key.location", p.display().to_string()),
                Pem::Inline(pem) => c.set("ssl.key.pem", pem),
            };
        }
        c.set(
            "ssl.endpoint.identification.algorithm",
            if t.verifies_hostname() {
                "https"
            } else {
                "none"
            },
        );
    }
}
