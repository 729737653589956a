//! The Kafka API registry and dispatch. One module per API: each declares
//! its request type, key and versions (`pub const API: Api<…> = Api::new(…)`)
//! beside its `handle`; the list in [`apis!`] below names the modules, and
//! from it come the `APIS` table (what is dispatched and what ApiVersions
//! advertises, so the two cannot drift apart), body decoding and dispatch.
//! Adding an API is one new file, its `mod` line and one line in that list.
//! The handler modules are declared outside the macro so that `cargo fmt`
//! reaches them (it does not look inside macros); a module missing from the
//! list leaves its `API` and `handle` unused, which `cargo clippy -- -D
//! warnings` refuses.

mod access;
mod codec;
mod config_support;
mod fuzz;
pub mod generated;
mod group_support;
mod key;
mod retired;
mod share_support;
mod throttle;
mod token_support;
pub mod wire;

// The handler modules, one per API (listed again, hottest first, in `apis!`).
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_replica_log_dirs;
mod alter_share_group_offsets;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_delegation_token;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_share_group_offsets;
mod delete_share_group_state;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_delegation_token;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_quorum;
mod describe_share_group_offsets;
mod describe_topic_partitions;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod expire_delegation_token;
mod fetch;
mod find_coordinator;
mod get_telemetry_subscriptions;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod initialize_share_group_state;
mod join_group;
mod leave_group;
mod list_config_resources;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod push_telemetry;
mod read_share_group_state;
mod read_share_group_state_summary;
mod renew_delegation_token;
mod sasl_authenticate;
mod sasl_handshake;
mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod streams_group_describe;
mod streams_group_heartbeat;
mod sync_group;
mod txn_offset_commit;
mod update_features;
mod write_share_group_state;
mod write_txn_markers;

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion, Request};
use rutomq_shards::{Close, Reply, ResponseFrame};

pub use codec::{encode, encode_request, DECODER_PANICS};
pub use fuzz::fuzz_frame;
pub use group_support::{
    group_coordinator, group_operations, resolve_offsets, AskedOffset, ResolvedOffsets, TopicRef,
};
pub use key::Key;

use crate::limits::SASL_RECEIVE_BYTES_MAX;
use crate::quota;
use crate::quota::sensors::ClientQuota;
use crate::security::session::Auth;
use crate::shard::Shard;

macro_rules! apis {
    ($($module:ident),* $(,)?) => {
        /// Everything rutomq implements, version by version.
        pub const APIS: &[ApiSpec] = &[$($module::API.spec,)*];

        /// Decodes the body of `req`'s API, hands it to the API's handler
        /// and turns its answer into a reply.
        async fn handle(shard: &Rc<Shard>, req: Req, mut body: Bytes) -> Result<Reply, Close> {
            let (key, corr, version) = (req.key, req.header.correlation_id, req.version);
            $(
                if key == $module::API.spec.key {
                    if version < $module::API.spec.min {
                        return retired::answer(&req, body);
                    }
                    let body = $module::API.decode(&mut body, version)?;
                    let out = throttle::request_quota(&req, $module::handle(shard, &req, body)).await;
                    return out.into_reply(&ReplyCtx {
                        correlation_id: corr,
                        version,
                        throttle_ms: req.throttle_ms.response_ms(),
                        quota: req.quota.clone(),
                    });
                }
            )*
            Err(Close("API in the table without a handler"))
        }

        /// Decodes the body of `req`'s API and drops it (hostile-input
        /// checks).
        pub fn decode_body(req: &Req, mut body: Bytes) -> Result<(), Close> {
            $(
                if req.key == $module::API.spec.key {
                    if req.version < $module::API.spec.min {
                        return retired::parse(req, body);
                    }
                    return $module::API.decode(&mut body, req.version).map(drop);
                }
            )*
            Err(Close("API in the table without a handler"))
        }

        /// Encodes the default request of `key` at `version`, header
        /// included (seed inputs for the decoder fuzz tests).
        pub fn encode_default_request(key: Key, version: i16) -> Option<Bytes> {
            $(
                if key == $module::API.spec.key {
                    return $module::API.default_request(version);
                }
            )*
            None
        }
    };
}

// The registry: one line per API, the hottest first (dispatch tries them
// in this order).
apis! {
    produce,
    fetch,
    list_offsets,
    offset_for_leader_epoch,
    metadata,
    describe_topic_partitions,
    api_versions,
    create_topics,
    delete_topics,
    init_producer_id,
    describe_configs,
    incremental_alter_configs,
    alter_configs,
    list_config_resources,
    get_telemetry_subscriptions,
    push_telemetry,
    create_delegation_token,
    renew_delegation_token,
    expire_delegation_token,
    describe_delegation_token,
    describe_log_dirs,
    alter_replica_log_dirs,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    create_partitions,
    describe_cluster,
    describe_quorum,
    update_features,
    delete_records,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    consumer_group_heartbeat,
    consumer_group_describe,
    streams_group_heartbeat,
    streams_group_describe,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    write_txn_markers,
    describe_producers,
    describe_transactions,
    list_transactions,
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    describe_acls,
    create_acls,
    delete_acls,
    describe_client_quotas,
    alter_client_quotas,
}

/// The message of the ACL APIs while no authorizer is configured.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

/// One implemented API and the versions served.
#[derive(Clone, Copy, Debug)]
pub struct ApiSpec {
    pub key: Key,
    pub min: i16,
    pub max: i16,
    /// The versions its codec knows.
    pub codec: (i16, i16),
    /// The request header version of each version.
    pub request_header: fn(i16) -> i16,
    /// The oldest version ApiVersions lists: `min`, or older versions
    /// Kafka lists without serving them (answered by [`retired`]).
    pub advertised_min: i16,
}

/// An API as its handler module declares it: the request type `R` it
/// decodes, its key (checked against `R` at compile time) and versions.
pub struct Api<R> {
    pub spec: ApiSpec,
    request: PhantomData<fn() -> R>,
}

impl<R: Request + Default> Api<R> {
    pub const fn new(key: ApiKey, min: i16, max: i16) -> Api<R> {
        assert!(
            key as i16 == R::KEY,
            "the API key is not the request type's"
        );
        Api::generated(min, max)
    }

    /// An API whose key kafka-protocol lacks (its request type is
    /// generated).
    pub const fn generated(min: i16, max: i16) -> Api<R> {
        assert!(min <= max, "empty version range");
        Api {
            spec: ApiSpec {
                key: Key(R::KEY),
                min,
                max,
                codec: (R::VERSIONS.min, R::VERSIONS.max),
                request_header: <R as HeaderVersion>::header_version,
                advertised_min: min,
            },
            request: PhantomData,
        }
    }

    /// The API with versions from `advertised_min` up to its served ones
    /// listed too (answered by [`retired`]).
    pub const fn advertising_from(self, advertised_min: i16) -> Api<R> {
        assert!(advertised_min <= self.spec.min);
        Api {
            spec: ApiSpec {
                advertised_min,
                ..self.spec
            },
            request: PhantomData,
        }
    }

    fn decode(&self, body: &mut Bytes, version: i16) -> Result<R, Close> {
        codec::decode(body, version)
    }

    fn default_request(&self, version: i16) -> Option<Bytes> {
        encode_request(version, &R::default())
    }
}

pub fn find(key: i16) -> Option<&'static ApiSpec> {
    APIS.iter().find(|a| a.key.0 == key)
}

/// What a response is encoded with.
pub struct ReplyCtx {
    pub correlation_id: i32,
    pub version: i16,
    /// The request's throttle time (its connection is muted for it).
    pub throttle_ms: i32,
    /// The connection's quotas, when any applies.
    pub quota: Option<Rc<ClientQuota>>,
}

/// What a handler answers with.
pub trait IntoReply {
    fn into_reply(self, ctx: &ReplyCtx) -> Result<Reply, Close>;
}

/// A response known now.
impl<R: Encodable + HeaderVersion + throttle::Throttled> IntoReply for R {
    fn into_reply(mut self, ctx: &ReplyCtx) -> Result<Reply, Close> {
        self.set_throttle_time_ms(ctx.throttle_ms);
        match encode(ctx.correlation_id, ctx.version, &self) {
            Some(frame) => Ok(Reply::Now(Some(frame.into()))),
            // Never skip a response silently: the client would pair the
            // next response with this request.
            None => Err(Close("response could not be encoded")),
        }
    }
}

/// A response frame that comes later (a durable Produce, a long-poll
/// Fetch); `None` for no response (acks=0). The connection reads its next
/// request meanwhile. Its handler sets its own throttle time (from the
/// request's `throttle_ms` when it encodes); the shard time its future
/// takes counts against the request quota of later requests.
pub struct Later(pub LocalBoxFuture<'static, Option<ResponseFrame>>);

impl IntoReply for Later {
    fn into_reply(self, ctx: &ReplyCtx) -> Result<Reply, Close> {
        let Some(q) = ctx
            .quota
            .clone()
            .filter(|q| q.of(quota::Kind::Request).is_some())
        else {
            return Ok(Reply::Later(self.0));
        };
        Ok(Reply::Later(
            async move {
                let (frame, busy) = throttle::timed(self.0).await;
                throttle::record_request_time(&q, busy);
                frame
            }
            .boxed_local(),
        ))
    }
}

/// A response that may be the connection's last: with `close`, it is
/// written after `delay` and the connection closes (a failed login).
pub struct MaybeLast<R> {
    pub response: R,
    pub close: bool,
    pub delay: Duration,
}

impl<R> MaybeLast<R> {
    pub fn open(response: R) -> MaybeLast<R> {
        MaybeLast {
            response,
            close: false,
            delay: Duration::ZERO,
        }
    }

    pub fn closing(response: R, delay: Duration) -> MaybeLast<R> {
        MaybeLast {
            response,
            close: true,
            delay,
        }
    }
}

impl<R: Encodable + HeaderVersion + throttle::Throttled> IntoReply for MaybeLast<R> {
    fn into_reply(self, ctx: &ReplyCtx) -> Result<Reply, Close> {
        let reply = self.response.into_reply(ctx)?;
        if !self.close {
            return Ok(reply);
        }
        let Reply::Now(frame) = reply else {
            return Err(Close("a closing response must be known now"));
        };
        let delay = self.delay;
        Ok(Reply::Last(
            async move {
                if !delay.is_zero() {
                    rutomq_shards::sleep(delay).await;
                }
                frame
            }
            .boxed_local(),
        ))
    }
}

/// What the engine keeps per connection.
pub struct Connection {
    /// Its listener: an index into the agent's listeners, and the name.
    pub listener: usize,
    pub listener_name: String,
    pub peer: Option<std::net::SocketAddr>,
    /// The client's address as ACLs name hosts ("10.0.0.1").
    pub host: String,
    pub auth: RefCell<Auth>,
    /// Its quotas as last resolved.
    pub quota: RefCell<Option<Rc<ClientQuota>>>,
    /// A throttled client's next request waits until then (KIP-219).
    pub muted_until: std::cell::Cell<Option<std::time::Instant>>,
    /// The client software's name and version (ApiVersions v3+).
    pub software: RefCell<Option<(String, String)>>,
    /// Its share sessions (KIP-932).
    pub share_sessions: RefCell<crate::share::sessions::Sessions>,
}

impl Connection {
    /// Mutes the connection for `d` from now (or longer, when it already
    /// is).
    pub fn mute_for(&self, d: Duration) {
        let until = std::time::Instant::now() + d;
        if self.muted_until.get().is_none_or(|t| t < until) {
            self.muted_until.set(Some(until));
        }
    }

    /// How long its next request must wait.
    pub fn muted_for(&self) -> Option<Duration> {
        let until = self.muted_until.get()?;
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            self.muted_until.set(None);
            return None;
        }
        Some(left)
    }
}

/// The shard-side request handler.
pub struct Service {
    pub shard: Rc<Shard>,
}

impl Service {
    pub fn new(shard: Rc<Shard>) -> Rc<Service> {
        Rc::new(Service { shard })
    }
}

/// A parsed request header plus the API it belongs to.
pub struct Req {
    pub key: Key,
    pub version: i16,
    pub header: RequestHeader,
    /// Size of the request frame (without its size prefix).
    pub frame_bytes: usize,
    /// The client's address.
    pub peer: Option<std::net::SocketAddr>,
    /// The connection (`None` outside a connection: decoder tests).
    pub conn: Option<Rc<Connection>>,
    /// The connection's quotas, when any applies.
    pub quota: Option<Rc<ClientQuota>>,
    /// The throttle time the request earned so far.
    pub throttle_ms: throttle::ThrottleTime,
}

impl Req {
    pub fn client_id(&self) -> String {
        self.header
            .client_id
            .as_ref()
            .map_or(String::new(), |c| c.replace('\0', "\u{fffd}"))
    }

    /// Runs `f` with the request's principal (`User:ANONYMOUS` outside a
    /// connection) and its host as ACLs name them.
    pub fn with_principal<T>(&self, f: impl FnOnce(&str, &str) -> T) -> T {
        let auth = self.conn.as_ref().map(|c| c.auth.borrow());
        let principal = auth
            .as_ref()
            .and_then(|a| a.principal())
            .unwrap_or(crate::security::session::ANONYMOUS);
        let host = self.conn.as_ref().map_or("", |c| c.host.as_str());
        f(principal, host)
    }

    /// The client's host as Kafka reports it ("/127.0.0.1").
    pub fn client_host(&self) -> String {
        self.peer
            .map_or_else(String::new, |p| format!("/{}", p.ip()))
    }

    /// The name of the listener the request came on (the first listener's
    /// outside a connection).
    pub fn listener_name<'a>(&'a self, shard: &'a Shard) -> &'a str {
        match &self.conn {
            Some(c) => &c.listener_name,
            None => &shard.agent.security.listeners[0].name,
        }
    }
}

impl rutomq_shards::Service for Service {
    type Conn = Rc<Connection>;

    fn open(
        &self,
        listener: usize,
        peer: Option<std::net::SocketAddr>,
        tls: Option<&rutomq_shards::tls::TlsInfo>,
    ) -> Result<Rc<Connection>, Close> {
        let agent = &self.shard.agent;
        let l = &agent.security.listeners[listener];
        let principal = match (tls, &agent.tls) {
            (Some(info), Some(t)) if !l.protocol.sasl() => {
                t.principal(&info.peer_certificates).map_err(|subject| {
                    self.shard.certificate_refused(&subject, peer, &l.name);
                    Close("no principal mapping rule matches the client certificate")
                })?
            }
            _ => crate::security::session::ANONYMOUS.to_owned(),
        };
        if let Some(info) = tls {
            tracing::debug!(%principal, peer = ?peer, listener = %l.name, protocol = info.protocol,
                client_certificate = !info.peer_certificates.is_empty(), "TLS connection");
        }
        Ok(Rc::new(Connection {
            listener,
            listener_name: l.name.clone(),
            peer,
            host: peer.map_or_else(String::new, |p| crate::security::acl::acl_host(p.ip())),
            auth: RefCell::new(Auth::new(l.protocol.sasl(), principal)),
            quota: RefCell::new(None),
            muted_until: std::cell::Cell::new(None),
            software: RefCell::new(None),
            share_sessions: RefCell::new(Default::default()),
        }))
    }

    fn tls_refused(&self, peer: Option<std::net::SocketAddr>, why: &str) {
        self.shard.tls_refused(peer, why);
    }

    fn hold(&self, conn: &Rc<Connection>) -> Option<Duration> {
        conn.muted_for()
    }

    fn throttle_accept(&self, peer: Option<std::net::SocketAddr>) -> Option<Duration> {
        let ip = peer?.ip();
        let ms = self.shard.connection_throttle_ms(ip);
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    fn answered(&self, api_key: i16, took: Duration) {
        self.shard.metrics.request_times.observe(api_key, took);
    }

    fn frame_bytes_max(&self, conn: &Rc<Connection>) -> usize {
        if conn.auth.borrow().is_authenticated() {
            usize::MAX
        } else {
            SASL_RECEIVE_BYTES_MAX
        }
    }

    fn call(
        self: Rc<Self>,
        conn: Rc<Connection>,
        frame: Bytes,
    ) -> LocalBoxFuture<'static, Result<Reply, Close>> {
        async move { dispatch(self.shard.clone(), conn, frame).await }.boxed_local()
    }
}

/// A frame's header, parsed; the body stays undecoded.
pub enum Parsed {
    Request(Req, Bytes),
    /// ApiVersions at a version newer than served: answered with error 35.
    UnsupportedApiVersions {
        correlation_id: i32,
    },
}

/// Parses one request frame's header (the frame without its size prefix).
/// Anything that is not a request of an implemented API at a served
/// version is a `Close` (except a too-new ApiVersions, which Kafka
/// answers); the body is decoded by its API's entry in the registry.
pub fn parse_request(mut frame: Bytes) -> Result<Parsed, Close> {
    let frame_bytes = frame.len();
    if frame.len() < 8 {
        return Err(Close("request shorter than its header"));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Some(spec) = find(key) else {
        return Err(Close("unknown or unimplemented API key"));
    };
    let header_version = if spec.key == ApiKey::ApiVersions {
        // Newer-than-known ApiVersions still uses the flexible header.
        if version >= 3 {
            2
        } else {
            1
        }
    } else {
        (spec.request_header)(version)
    };
    let header: RequestHeader = codec::decode(&mut frame, header_version)?;
    if version < spec.advertised_min || version > spec.max {
        if spec.key == ApiKey::ApiVersions {
            return Ok(Parsed::UnsupportedApiVersions {
                correlation_id: header.correlation_id,
            });
        }
        return Err(Close("unsupported API version"));
    }
    Ok(Parsed::Request(
        Req {
            key: spec.key,
            version,
            header,
            frame_bytes,
            peer: None,
            conn: None,
            quota: None,
            throttle_ms: throttle::ThrottleTime::default(),
        },
        frame,
    ))
}

async fn dispatch(shard: Rc<Shard>, conn: Rc<Connection>, frame: Bytes) -> Result<Reply, Close> {
    // After SaslHandshake v0 the client's frames are bare SASL tokens.
    if conn.auth.borrow().expects_raw_token() {
        return Ok(sasl_authenticate::raw_token(&shard, &conn, &frame));
    }
    match parse_request(frame)? {
        Parsed::Request(mut req, body) => {
            req.peer = conn.peer;
            if !conn.auth.borrow().is_authenticated()
                && !req.key.is_any(&[
                    ApiKey::ApiVersions,
                    ApiKey::SaslHandshake,
                    ApiKey::SaslAuthenticate,
                ])
            {
                let auth = conn.auth.borrow();
                if auth.session_expired() {
                    shard.session_expired(auth.principal().unwrap_or("?"), conn.peer, req.key);
                    return Err(Close("SASL session expired without re-authentication"));
                }
                shard.refused_before_auth(conn.peer, &conn.listener_name, req.key);
                return Err(Close("request before authentication"));
            }
            if conn.auth.borrow().is_authenticated()
                && !req
                    .key
                    .is_any(&[ApiKey::SaslHandshake, ApiKey::SaslAuthenticate])
            {
                let client_id = req.header.client_id.as_deref().unwrap_or("");
                req.quota = throttle::client_quota(&shard, &conn, client_id);
                req.throttle_ms = throttle::ThrottleTime::new(req.quota.is_some());
            }
            req.conn = Some(conn);
            // A JoinGroup or SyncGroup may wait for the rebalance; like
            // Kafka, the connection's next request waits behind it.
            handle(&shard, req, body).await
        }
        Parsed::UnsupportedApiVersions { correlation_id } => Ok(Reply::Now(
            api_versions::unsupported(correlation_id).map(ResponseFrame::from),
        )),
    }
}

/// A Kafka string of `s`.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 15 keys only KRaft controllers and brokers send each other:
    /// never served (agents register in PostgreSQL).
    const BROKER_INTERNAL: [i16; 15] = [52, 53, 54, 56, 58, 59, 62, 63, 64, 67, 70, 73, 80, 81, 82];
    /// Keys Kafka 4 retired (LeaderAndIsr, StopReplica, UpdateMetadata,
    /// ControlledShutdown).
    const RETIRED: [i16; 4] = [4, 5, 6, 7];

    #[test]
    fn only_client_facing_keys_of_kafka_4_3_are_served() {
        // Kafka 4.3's keys are 0..=92; the product promises the 74 left
        // without the broker-internal and the retired ones.
        let promised: Vec<i16> = (0..=92)
            .filter(|k| !BROKER_INTERNAL.contains(k) && !RETIRED.contains(k))
            .collect();
        assert_eq!(promised.len(), 74);
        for a in APIS {
            assert!(
                promised.contains(&a.key.0),
                "{:?} is not a promised key",
                a.key
            );
        }
        // Every promised key is served.
        let served: std::collections::BTreeSet<i16> = APIS.iter().map(|a| a.key.0).collect();
        let expected: std::collections::BTreeSet<i16> = promised.iter().copied().collect();
        assert_eq!(served, expected);
        assert_eq!(served.len(), 74);
    }

    /// Where rutomq serves fewer versions than Kafka 4.3 lists, and why:
    /// (key, highest served, reason).
    const BEHIND: &[(i16, i16, &str)] = &[
        (
            24,
            3,
            "AddPartitionsToTxn 4-5: KIP-890 broker-side verification, sent by brokers",
        ),
        (
            26,
            4,
            "EndTxn 5: transaction version 2 (KIP-890 part 2) is not implemented",
        ),
        (
            27,
            1,
            "WriteTxnMarkers 2: transaction version 2 markers (KIP-1228)",
        ),
        (
            28,
            4,
            "TxnOffsetCommit 5: transaction version 2 (KIP-890 part 2)",
        ),
        (
            78,
            1,
            "ShareFetch 2: acquire modes and renew acknowledgements (KIP-1206, KIP-1222)",
        ),
        (
            79,
            1,
            "ShareAcknowledge 2: renew acknowledgements (KIP-1222)",
        ),
        (
            85,
            0,
            "WriteShareGroupState 1: delivery-complete counts (KIP-1226)",
        ),
        (
            87,
            0,
            "ReadShareGroupStateSummary 1: delivery-complete counts (KIP-1226)",
        ),
        (
            90,
            0,
            "DescribeShareGroupOffsets 1: share-partition lag (KIP-1226)",
        ),
    ];

    #[test]
    fn versions_are_kafka_4_3s_save_the_named_gaps() {
        use super::generated::kafka_versions::{KAFKA, VERSIONS};
        assert_eq!(KAFKA, "4.3.0");
        for a in APIS {
            let (_, lo, hi, name) = VERSIONS
                .iter()
                .copied()
                .find(|v| v.0 == a.key.0)
                .unwrap_or_else(|| panic!("{:?} is not a Kafka {KAFKA} key", a.key));
            // Lower versions may be listed without being served (Produce 0-2,
            // as Kafka 4 lists them for old librdkafka, KAFKA-18659).
            assert_eq!(a.min, lo, "{name}: lowest version served");
            assert!(a.advertised_min <= lo, "{name}: lowest version listed");
            let behind = BEHIND.iter().find(|b| b.0 == a.key.0);
            match behind {
                None => assert_eq!(a.max, hi, "{name}: highest version served"),
                Some(&(_, max, why)) => {
                    assert!(a.max < hi, "{name} is not behind Kafka any more ({why})");
                    assert_eq!(a.max, max, "{name}: {why}");
                }
            }
        }
    }

    #[test]
    fn table_is_within_the_library_and_unique() {
        for (i, a) in APIS.iter().enumerate() {
            let (lo, hi) = a.codec;
            assert!(a.min >= lo, "{:?} min below the codec's", a.key);
            assert!(a.max <= hi, "{:?} max above the codec's", a.key);
            assert!(a.min <= a.max);
            assert!(
                APIS[i + 1..].iter().all(|b| b.key != a.key),
                "{:?} twice",
                a.key
            );
        }
    }
}
