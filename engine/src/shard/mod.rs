//! One shard's state, shared-nothing (`Rc`/`RefCell`, never borrowed across
//! an `.await`): its open batch buffer ([`crate::flush::ShardBuffer`]), its
//! topic cache, its read side (high watermarks with their long-poll waiters,
//! cached spans: [`crate::read::Reader`]), its fetch byte budget and its
//! metrics. Each is its own type; the shard only holds them together and
//! feeds the reader from the hub.

mod fetch_budget;
pub mod topic_cache;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

pub use fetch_budget::{FetchBudget, FetchGrant};
pub use topic_cache::TopicCache;

use crate::agent::Agent;
use crate::flush::ShardBuffer;
use crate::hub::HubMessage;
use crate::limits::{DENIED_NAME_LOGGED_BYTES, FETCH_BYTES_INFLIGHT_MAX};
use crate::metrics::ShardMetrics;
use crate::quota::ShardQuotas;
use crate::read::Reader;
use crate::security::acl::{op, resource};
use crate::security::authorizer::ShardAcls;
use crate::security::session::FailureLog;

pub struct Shard {
    pub index: usize,
    pub agent: Arc<Agent>,
    pub buffer: Rc<ShardBuffer>,
    pub topics: TopicCache,
    pub reader: Reader,
    pub fetch_budget: FetchBudget,
    pub metrics: Arc<ShardMetrics>,
    /// The ACLs, with an authorizer.
    pub acls: Option<ShardAcls>,
    /// The client quotas.
    pub quotas: ShardQuotas,
    /// The dynamic configs (broker, group, client-metrics).
    pub configs: crate::dynamic::ShardConfigs,
    /// Failed logins and requests before authentication, for the log.
    auth_failures: RefCell<FailureLog>,
}

impl Shard {
    pub fn new(
        index: usize,
        agent: Arc<Agent>,
        hub_rx: async_channel::Receiver<HubMessage>,
    ) -> Rc<Shard> {
        let metrics = Arc::new(ShardMetrics::default());
        let shard = Rc::new(Shard {
            index,
            agent: agent.clone(),
            buffer: ShardBuffer::new(agent.flush.clone(), agent.sealed_tx.clone()),
            topics: TopicCache::new(agent.meta.clone()),
            reader: Reader::new(
                agent.meta.clone(),
                agent.storage.clone(),
                agent.cfg.read_verify_crc,
                agent.cfg.read_ahead_fetches,
                metrics.clone(),
            ),
            fetch_budget: FetchBudget::new(FETCH_BYTES_INFLIGHT_MAX),
            metrics,
            acls: agent.authorizer.clone().map(ShardAcls::new),
            quotas: ShardQuotas::new(&agent.quotas.copy),
            configs: crate::dynamic::ShardConfigs::new(&agent.dynamic.copy),
            auth_failures: RefCell::new(FailureLog::default()),
        });
        agent
            .shard_metrics
            .lock()
            .expect("metrics lock")
            .push(shard.metrics.clone());
        let weak = Rc::downgrade(&shard);
        rutomq_shards::spawn(async move {
            while let Ok(msg) = hub_rx.recv().await {
                let Some(shard) = weak.upgrade() else { break };
                for name in &msg.topics {
                    shard.topics.forget(name);
                }
                shard.reader.learn(&msg);
            }
        });
        shard
    }

    /// Whether a refusal keyed `key` is logged now: `Some(n)` with the
    /// refusals since its last line, once per key per
    /// `AUTH_FAILURE_LOG_INTERVAL` (the shard's bounded `FailureLog`).
    fn log_once(&self, key: &str) -> Option<u64> {
        self.auth_failures.borrow_mut().record(key, Instant::now())
    }

    /// How long a connection just accepted from `ip` waits before it is
    /// closed for its IP's connection creation rate (0: it is served);
    /// a refusal is counted and logged once per IP per interval.
    pub fn connection_throttle_ms(&self, ip: std::net::IpAddr) -> u64 {
        let quotas = &self.agent.quotas;
        let Some(bound) = self
            .quotas
            .with(&quotas.copy, |set| set.connection_rate(ip))
        else {
            return 0;
        };
        let ms =
            quotas
                .sensors
                .connection_from(ip, bound, crate::limits::QUOTA_TIME_THROTTLE_MS_MAX);
        if ms > 0 {
            if let Some(times) = self.log_once(&format!("connection-rate {ip}")) {
                tracing::warn!(peer = %ip, times, rate_max = bound, throttle_ms = ms,
                    "connection over its IP's connection_creation_rate quota; closing it after the throttle time");
            }
        }
        ms
    }

    /// A TLS handshake from `peer` that failed (`why`): the runtime closed
    /// and counted it; logged once per client address per interval.
    pub fn tls_refused(&self, peer: Option<std::net::SocketAddr>, why: &str) {
        let who = peer.map_or_else(|| "unknown".to_owned(), |p| p.ip().to_string());
        if let Some(times) = self.log_once(&format!("tls {who}")) {
            tracing::warn!(peer = ?peer, times, "TLS handshake failed; connection closed: {why}");
        }
    }

    /// A failed SASL exchange of `user` (`None`: unknown) from `peer`:
    /// counted, and logged once per principal per interval.
    pub fn auth_failed(
        &self,
        user: Option<&str>,
        peer: Option<std::net::SocketAddr>,
        mechanism: &str,
        message: &str,
    ) {
        self.metrics
            .sasl_authentication_failures
            .fetch_add(1, Ordering::Relaxed);
        let who = match (user, peer) {
            (Some(u), _) => format!("User:{u}"),
            (None, Some(p)) => format!("unnamed client at {}", p.ip()),
            (None, None) => "unnamed client".to_owned(),
        };
        if let Some(failures) = self.log_once(&who) {
            tracing::warn!(principal = %who, peer = ?peer, mechanism, failures, "authentication failed: {message}");
        }
    }

    /// A verified client certificate whose subject no principal mapping
    /// rule takes: the connection is closed (counted by the runtime as a
    /// failed handshake; logged once per subject per interval).
    pub fn certificate_refused(
        &self,
        subject: &str,
        peer: Option<std::net::SocketAddr>,
        listener: &str,
    ) {
        if let Some(times) = self.log_once(&format!("certificate {subject}")) {
            tracing::warn!(subject, peer = ?peer, listener, times,
                "TLS client certificate refused: no --ssl-principal-mapping-rules rule matches its subject");
        }
    }

    /// A request after the connection's SASL session expired without
    /// re-authentication (KIP-368): the connection is closed (counted;
    /// logged once per principal per interval).
    pub fn session_expired(
        &self,
        who: &str,
        peer: Option<std::net::SocketAddr>,
        key: impl std::fmt::Debug,
    ) {
        self.metrics
            .sasl_sessions_expired
            .fetch_add(1, Ordering::Relaxed);
        if let Some(times) = self.log_once(&format!("expired {who}")) {
            tracing::info!(principal = who, peer = ?peer, api = ?key, times,
                "closing a connection whose SASL session expired without re-authentication");
        }
    }

    /// A request refused by the authorizer: counted, and logged once per
    /// principal, operation and resource per interval (Kafka's authorizer
    /// log line).
    #[allow(clippy::too_many_arguments)]
    pub fn denied(
        &self,
        principal: &str,
        host: &str,
        operation: i8,
        resource_type: i8,
        name: &str,
        key: impl std::fmt::Debug,
    ) {
        self.metrics
            .authorization_denials
            .fetch_add(1, Ordering::Relaxed);
        // Names come from clients: the log and its key hold a bounded part.
        let cut = (0..=DENIED_NAME_LOGGED_BYTES.min(name.len()))
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        let more = if cut < name.len() { "..." } else { "" };
        let what = format!("{}:{}{more}", resource::name(resource_type), &name[..cut]);
        if let Some(times) = self.log_once(&format!("denied {principal} {operation} {what}")) {
            tracing::info!(principal, host, operation = op::name(operation), resource = %what,
                api = ?key, times, "authorization denied");
        }
    }

    /// A request other than ApiVersions or SASL before authenticating:
    /// the connection is closed (counted; logged once per client address
    /// per interval).
    pub fn refused_before_auth(
        &self,
        peer: Option<std::net::SocketAddr>,
        listener: &str,
        key: impl std::fmt::Debug,
    ) {
        self.metrics
            .requests_before_authentication
            .fetch_add(1, Ordering::Relaxed);
        let who = peer.map_or_else(|| "unknown".to_owned(), |p| p.ip().to_string());
        if let Some(times) = self.log_once(&format!("before-auth {who}")) {
            tracing::warn!(peer = %who, api = ?key, listener, times,
                "closing connection: request before SASL authentication");
        }
    }
}
