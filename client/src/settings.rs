//! Producer settings, with Kafka's names in the docs.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::{Compression, KafkaProducerBackend};

/// `acks`: how many replicas must have a batch before it counts as
/// delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Acks {
    /// `acks=all` (-1), the default.
    #[default]
    All,
    /// `acks=1`: the leader alone.
    Leader,
}

impl Acks {
    pub(crate) fn code(self) -> i16 {
        match self {
            Acks::All => -1,
            Acks::Leader => 1,
        }
    }
}

/// How the client talks to brokers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Security {
    /// `security.protocol=PLAINTEXT`.
    #[default]
    Plaintext,
    /// `security.protocol=SSL`: TLS (with a client certificate when the
    /// settings carry one).
    Ssl(crate::TlsSettings),
    /// `security.protocol=SASL_PLAINTEXT` with this mechanism.
    SaslPlaintext(crate::SaslMechanism),
    /// `security.protocol=SASL_SSL`: SASL with this mechanism inside TLS.
    SaslSsl(crate::SaslMechanism, crate::TlsSettings),
}

impl Security {
    /// Checks the settings (reads and parses TLS certificates and keys) so
    /// that a mistake fails when the client is made, not on first connect.
    pub fn validate(&self) -> Result<()> {
        match self {
            Security::Ssl(t) | Security::SaslSsl(_, t) => t.client_config().map(drop),
            Security::Plaintext | Security::SaslPlaintext(_) => Ok(()),
        }
    }
}

/// Settings of a [`crate::KafkaProducer`].
#[derive(Clone, Debug)]
pub struct KafkaProducerSettings {
    pub bootstrap_servers: String,
    pub backend: KafkaProducerBackend,
    pub client_id: String,
    pub security: Security,
    pub acks: Acks,
    pub compression: Compression,
    /// `linger.ms`: how long a batch may wait for more records.
    pub linger: Duration,
    /// `batch.size`: a batch closes when it holds this many bytes.
    pub batch_size_bytes: usize,
    /// `max.request.size`: one Produce request (all its partitions' batches
    /// together), and so one record, at most.
    pub max_request_size_bytes: usize,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight_requests_per_connection: usize,
    /// `retries`: further attempts of a batch after a retriable error.
    pub retries: u32,
    /// `retry.backoff.ms`.
    pub retry_backoff: Duration,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// `delivery.timeout.ms`: a record not confirmed within this after
    /// `send` fails.
    pub delivery_timeout: Duration,
    /// `buffer.memory`: bytes of records not yet delivered; `send` waits
    /// when they are used up.
    pub buffer_memory_bytes: usize,
    /// More librdkafka properties (rdkafka backend only).
    pub rdkafka_properties: Vec<(String, String)>,
}

impl KafkaProducerSettings {
    pub fn new(bootstrap_servers: impl Into<String>) -> KafkaProducerSettings {
        KafkaProducerSettings {
            bootstrap_servers: bootstrap_servers.into(),
            backend: KafkaProducerBackend::default(),
            client_id: "datum-mq".into(),
            security: Security::Plaintext,
            acks: Acks::All,
            compression: Compression::None,
            linger: Duration::from_millis(5),
            // Large batches: one request carries at most one batch per
            // partition (a partition's requests never overlap), so the
            // serial path moves batch_size_bytes per partition per round
            // trip. Below the topics' default max.message.bytes (1048588).
            batch_size_bytes: 1_000_000,
            max_request_size_bytes: 16 << 20,
            // The measured winner of 1, 2 and 5 (benches/datum-mq.sh,
            // benches/results/2026-12-01-datum-mq.md, third run).
            max_in_flight_requests_per_connection: 5,
            retries: 10,
            retry_backoff: Duration::from_millis(100),
            request_timeout: Duration::from_secs(30),
            delivery_timeout: Duration::from_secs(120),
            buffer_memory_bytes: 64 << 20,
            rdkafka_properties: Vec::new(),
        }
    }

    pub fn with_security(mut self, security: Security) -> Self {
        self.security = security;
        self
    }
    pub fn with_backend(mut self, backend: KafkaProducerBackend) -> Self {
        self.backend = backend;
        self
    }
    pub fn with_client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }
    pub fn with_acks(mut self, acks: Acks) -> Self {
        self.acks = acks;
        self
    }
    pub fn with_compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }
    pub fn with_linger(mut self, d: Duration) -> Self {
        self.linger = d;
        self
    }
    pub fn with_batch_size_bytes(mut self, n: usize) -> Self {
        self.batch_size_bytes = n;
        self
    }
    pub fn with_max_request_size_bytes(mut self, n: usize) -> Self {
        self.max_request_size_bytes = n;
        self
    }
    /// Produce requests in flight per broker connection (default 5;
    /// requests for one partition never overlap). 1 is the serial path:
    /// one request at a time carrying every ready partition. On the
    /// rdkafka backend more than 1 makes it an idempotent producer, which
    /// needs acks=all and at most 5.
    pub fn with_max_in_flight_requests_per_connection(mut self, n: usize) -> Self {
        self.max_in_flight_requests_per_connection = n;
        self
    }
    pub fn with_retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }
    pub fn with_retry_backoff(mut self, d: Duration) -> Self {
        self.retry_backoff = d;
        self
    }
    pub fn with_request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }
    pub fn with_delivery_timeout(mut self, d: Duration) -> Self {
        self.delivery_timeout = d;
        self
    }
    pub fn with_buffer_memory_bytes(mut self, n: usize) -> Self {
        self.buffer_memory_bytes = n;
        self
    }
    /// A librdkafka property (rdkafka backend only; the native backend
    /// refuses settings it would ignore).
    pub fn with_rdkafka_property(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.rdkafka_properties.push((k.into(), v.into()));
        self
    }

    /// Checks ranges and the backend's abilities.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(Error::Config("bootstrap_servers is empty".into()));
        }
        if self.max_in_flight_requests_per_connection == 0
            || self.max_in_flight_requests_per_connection > 64
        {
            return Err(Error::Config(format!(
                "max_in_flight_requests_per_connection {} (1..=64)",
                self.max_in_flight_requests_per_connection
            )));
        }
        if self.batch_size_bytes < 1024 || self.batch_size_bytes > self.max_request_size_bytes {
            return Err(Error::Config(format!(
                "batch_size_bytes {} (1024..=max_request_size_bytes {})",
                self.batch_size_bytes, self.max_request_size_bytes
            )));
        }
        let hour = Duration::from_secs(3600);
        if self.linger > hour || self.request_timeout > Duration::from_secs(900) {
            return Err(Error::Config(format!(
                "linger {:?} (at most 1 h) or request_timeout {:?} (at most 15 min)",
                self.linger, self.request_timeout
            )));
        }
        if self.retry_backoff < Duration::from_millis(1)
            || self.retry_backoff > Duration::from_secs(300)
        {
            return Err(Error::Config(format!(
                "retry_backoff {:?} (1 ms..=5 min)",
                self.retry_backoff
            )));
        }
        if self.delivery_timeout > Duration::from_secs(7 * 24 * 3600)
            || self.delivery_timeout < self.linger + self.request_timeout
        {
            return Err(Error::Config(format!(
                "delivery_timeout {:?} must be at least linger + request_timeout ({:?}) and at most 7 days",
                self.delivery_timeout,
                self.linger + self.request_timeout
            )));
        }
        if self.buffer_memory_bytes < self.max_request_size_bytes {
            return Err(Error::Config(format!(
                "buffer_memory_bytes {} below max_request_size_bytes {}",
                self.buffer_memory_bytes, self.max_request_size_bytes
            )));
        }
        if self.backend == KafkaProducerBackend::Native {
            if !crate::NATIVE_COMPRESSIONS.contains(&self.compression) {
                return Err(Error::unsupported_native_producer(&format!(
                    "{:?} compression",
                    self.compression
                )));
            }
            if let Some((k, _)) = self.rdkafka_properties.first() {
                return Err(Error::unsupported_native_producer(&format!(
                    "the librdkafka property {k:?}"
                )));
            }
        }
        Ok(())
    }
}

/// `auto.offset.reset`: where a partition with no committed offset starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    Earliest,
    /// Kafka's default.
    #[default]
    Latest,
}

/// A change of a [`crate::KafkaSource`]'s partitions, told to its
/// [`RebalanceListener`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RebalanceEvent {
    /// These partitions are this member's now; records come from their
    /// committed offsets (or the reset policy).
    Assigned(Vec<(String, i32)>),
    /// These partitions are being given up in a rebalance. What was
    /// acknowledged of them has been committed (or the commit failed and
    /// was logged) before this call; acknowledgements of their records
    /// from now on are ignored.
    Revoked(Vec<(String, i32)>),
    /// These partitions were lost: the member was fenced out of the group
    /// (its session ran out), so they could not be committed; another
    /// member replays them from the last commit.
    Lost(Vec<(String, i32)>),
}

/// Called on the consumer's own task (native) or librdkafka's polling
/// (rdkafka) at each assignment change; keep it short. Not called on
/// `close`.
#[derive(Clone)]
pub struct RebalanceListener(pub std::sync::Arc<dyn Fn(&RebalanceEvent) + Send + Sync>);

impl std::fmt::Debug for RebalanceListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RebalanceListener")
    }
}

/// `group.protocol`: how a consumer takes part in its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    /// The consumer protocol (KIP-848) when the group coordinator offers
    /// it (ConsumerGroupHeartbeat), the classic one otherwise. Native
    /// backend; the rdkafka backend takes the classic protocol.
    #[default]
    Auto,
    /// JoinGroup/SyncGroup/Heartbeat, client-side `range` assignment.
    Classic,
    /// KIP-848: the coordinator assigns, partitions move incrementally.
    /// Fails when the coordinator does not offer it. Native backend only.
    Consumer,
}

/// Settings of a [`crate::KafkaSource`].
#[derive(Clone, Debug)]
pub struct KafkaConsumerSettings {
    pub bootstrap_servers: String,
    pub backend: crate::KafkaConsumerBackend,
    pub group_id: String,
    pub group_protocol: GroupProtocol,
    pub client_id: String,
    pub security: Security,
    pub auto_offset_reset: AutoOffsetReset,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`, sent as the rebalance timeout.
    pub rebalance_timeout: Duration,
    /// How often acknowledged offsets are committed (`auto.commit.interval.ms`;
    /// only acknowledged ones, never ahead of them).
    pub auto_commit_interval: Duration,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
    /// `fetch.max.bytes`.
    pub fetch_max_bytes: usize,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: usize,
    /// `request.timeout.ms`.
    pub request_timeout: Duration,
    /// More librdkafka properties (rdkafka backend only).
    pub rdkafka_properties: Vec<(String, String)>,
    /// Told of every assignment change (`ConsumerRebalanceListener`).
    pub rebalance_listener: Option<RebalanceListener>,
}

impl KafkaConsumerSettings {
    pub fn new(bootstrap_servers: impl Into<String>, group_id: impl Into<String>) -> Self {
        KafkaConsumerSettings {
            bootstrap_servers: bootstrap_servers.into(),
            backend: crate::KafkaConsumerBackend::Native,
            group_id: group_id.into(),
            group_protocol: GroupProtocol::Auto,
            client_id: "datum-mq".into(),
            security: Security::Plaintext,
            auto_offset_reset: AutoOffsetReset::Latest,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            rebalance_timeout: Duration::from_secs(300),
            auto_commit_interval: Duration::from_secs(5),
            fetch_max_wait: Duration::from_millis(500),
            fetch_max_bytes: 50 << 20,
            max_partition_fetch_bytes: 1 << 20,
            request_timeout: Duration::from_secs(30),
            rdkafka_properties: Vec::new(),
            rebalance_listener: None,
        }
    }
    pub fn with_security(mut self, security: Security) -> Self {
        self.security = security;
        self
    }
    pub fn with_rebalance_listener(
        mut self,
        f: impl Fn(&RebalanceEvent) + Send + Sync + 'static,
    ) -> Self {
        self.rebalance_listener = Some(RebalanceListener(std::sync::Arc::new(f)));
        self
    }
    pub(crate) fn tell(&self, e: RebalanceEvent) {
        let empty = match &e {
            RebalanceEvent::Assigned(p) | RebalanceEvent::Revoked(p) | RebalanceEvent::Lost(p) => {
                p.is_empty()
            }
        };
        if let (Some(l), false) = (&self.rebalance_listener, empty) {
            (l.0)(&e);
        }
    }
    pub fn with_backend(mut self, b: crate::KafkaConsumerBackend) -> Self {
        self.backend = b;
        self
    }
    pub fn with_client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }
    pub fn with_group_protocol(mut self, p: GroupProtocol) -> Self {
        self.group_protocol = p;
        self
    }
    pub fn with_auto_offset_reset(mut self, r: AutoOffsetReset) -> Self {
        self.auto_offset_reset = r;
        self
    }
    pub fn with_session_timeout(mut self, d: Duration) -> Self {
        self.session_timeout = d;
        self
    }
    pub fn with_heartbeat_interval(mut self, d: Duration) -> Self {
        self.heartbeat_interval = d;
        self
    }
    pub fn with_rebalance_timeout(mut self, d: Duration) -> Self {
        self.rebalance_timeout = d;
        self
    }
    pub fn with_auto_commit_interval(mut self, d: Duration) -> Self {
        self.auto_commit_interval = d;
        self
    }
    pub fn with_fetch_max_wait(mut self, d: Duration) -> Self {
        self.fetch_max_wait = d;
        self
    }
    pub fn with_rdkafka_property(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.rdkafka_properties.push((k.into(), v.into()));
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(Error::Config("bootstrap_servers is empty".into()));
        }
        if self.group_id.is_empty() {
            return Err(Error::Config("group_id is empty".into()));
        }
        let day = Duration::from_secs(24 * 3600);
        for (name, d) in [
            ("session_timeout", self.session_timeout),
            ("rebalance_timeout", self.rebalance_timeout),
            ("auto_commit_interval", self.auto_commit_interval),
            ("fetch_max_wait", self.fetch_max_wait),
            ("request_timeout", self.request_timeout),
        ] {
            if d > day || d.is_zero() {
                return Err(Error::Config(format!(
                    "{name} {d:?} (above 0, at most a day)"
                )));
            }
        }
        if self.heartbeat_interval >= self.session_timeout {
            return Err(Error::Config(format!(
                "heartbeat_interval {:?} must be below session_timeout {:?}",
                self.heartbeat_interval, self.session_timeout
            )));
        }
        if self.fetch_max_bytes > i32::MAX as usize
            || self.max_partition_fetch_bytes > i32::MAX as usize
        {
            return Err(Error::Config("fetch sizes above 2 GiB".into()));
        }
        if self.backend == crate::KafkaConsumerBackend::Rdkafka
            && self.group_protocol == GroupProtocol::Consumer
        {
            return Err(Error::Unsupported(
                "the consumer group protocol (KIP-848) is built on the native consumer only; use KafkaConsumerBackend::Native".into(),
            ));
        }
        if self.backend == crate::KafkaConsumerBackend::Native {
            if let Some((k, _)) = self.rdkafka_properties.first() {
                return Err(Error::unsupported_native_consumer(&format!(
                    "the librdkafka property {k:?}"
                )));
            }
        }
        Ok(())
    }
}
