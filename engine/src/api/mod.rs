//! The Kafka API registry and dispatch. One module per API; the `APIS`
//! table is both what is dispatched and what ApiVersions advertises, so the
//! two cannot drift apart.

mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod produce;
mod sync_group;

use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use rutomq_shards::{Close, Reply};

use crate::shard::Shard;

/// One implemented API and the versions served.
pub struct ApiSpec {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn spec(key: ApiKey, min: i16, max: i16) -> ApiSpec {
    ApiSpec { key, min, max }
}

/// Everything rutomq implements, version by version.
pub const APIS: &[ApiSpec] = &[
    spec(ApiKey::Produce, 3, 13),
    spec(ApiKey::Fetch, 4, 18),
    spec(ApiKey::ListOffsets, 1, 10),
    spec(ApiKey::Metadata, 0, 13),
    spec(ApiKey::ApiVersions, 0, 4),
    spec(ApiKey::CreateTopics, 2, 7),
    spec(ApiKey::DeleteTopics, 1, 6),
    spec(ApiKey::InitProducerId, 0, 5),
    spec(ApiKey::DescribeConfigs, 1, 4),
    spec(ApiKey::CreatePartitions, 0, 3),
    spec(ApiKey::DescribeCluster, 0, 2),
    spec(ApiKey::DeleteRecords, 0, 2),
    spec(ApiKey::FindCoordinator, 0, 6),
    spec(ApiKey::JoinGroup, 0, 9),
    spec(ApiKey::SyncGroup, 0, 5),
    spec(ApiKey::Heartbeat, 0, 4),
    spec(ApiKey::LeaveGroup, 0, 5),
    spec(ApiKey::OffsetCommit, 2, 9),
    spec(ApiKey::OffsetFetch, 1, 9),
    spec(ApiKey::DescribeGroups, 0, 6),
    spec(ApiKey::ListGroups, 0, 5),
    spec(ApiKey::DeleteGroups, 0, 2),
    spec(ApiKey::OffsetDelete, 0, 0),
    spec(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    spec(ApiKey::ConsumerGroupDescribe, 0, 1),
];

pub fn find(key: i16) -> Option<&'static ApiSpec> {
    APIS.iter().find(|a| a.key as i16 == key)
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
    pub key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    /// Size of the request frame (without its size prefix).
    pub frame_bytes: usize,
    /// The client's address.
    pub peer: Option<std::net::SocketAddr>,
}

impl Req {
    pub fn client_id(&self) -> String {
        self.header
            .client_id
            .as_ref()
            .map_or(String::new(), |c| c.replace('\0', "\u{fffd}"))
    }

    /// The client's host as Kafka reports it ("/127.0.0.1").
    pub fn client_host(&self) -> String {
        self.peer
            .map_or_else(String::new, |p| format!("/{}", p.ip()))
    }
}

impl rutomq_shards::Service for Service {
    fn call(
        self: Rc<Self>,
        peer: Option<std::net::SocketAddr>,
        frame: Bytes,
    ) -> LocalBoxFuture<'static, Result<Reply, Close>> {
        async move { dispatch(self.shard.clone(), peer, frame).await }.boxed_local()
    }
}

/// Decoder panics caught (a bug in a decoder; each closes one connection).
pub static DECODER_PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Decodes a message, turning a decoder error or panic into a closed
/// connection: the network is hostile input.
fn decode<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, Close> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| T::decode(buf, version))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(Close("malformed request body")),
        Err(_) => {
            DECODER_PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!("a request made the decoder panic; closing the connection");
            Err(Close("request body made the decoder panic"))
        }
    }
}

/// Encodes a response frame: size, response header, body.
pub fn encode<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    resp: &R,
) -> Option<Bytes> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = R::header_version(version);
    let size = header.compute_size(header_version).ok()? + resp.compute_size(version).ok()?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(size as i32);
    if let Err(e) = header
        .encode(&mut buf, header_version)
        .and_then(|_| resp.encode(&mut buf, version))
    {
        tracing::error!(error = %e, "response encoding failed");
        return None;
    }
    Some(buf.freeze())
}

macro_rules! bodies {
    ($($variant:ident => $ty:ident),* $(,)?) => {
        /// A decoded request body of an implemented API.
        pub enum Body {
            $($variant(kafka_protocol::messages::$ty),)*
        }

        /// Encodes the default request of `key` at `version`, header included
        /// (seed inputs for the decoder fuzz tests).
        pub fn encode_default_request(key: ApiKey, version: i16) -> Option<Bytes> {
            match key {
                $(ApiKey::$variant => encode_request(key, version, &kafka_protocol::messages::$ty::default()),)*
                _ => None,
            }
        }

        fn decode_body(key: ApiKey, frame: &mut Bytes, version: i16) -> Result<Body, Close> {
            match key {
                $(ApiKey::$variant => Ok(Body::$variant(decode(frame, version)?)),)*
                _ => Err(Close("API in the table without a handler")),
            }
        }
    };
}

bodies! {
    ApiVersions => ApiVersionsRequest,
    Metadata => MetadataRequest,
    CreateTopics => CreateTopicsRequest,
    DeleteTopics => DeleteTopicsRequest,
    DeleteRecords => DeleteRecordsRequest,
    CreatePartitions => CreatePartitionsRequest,
    DescribeCluster => DescribeClusterRequest,
    DescribeConfigs => DescribeConfigsRequest,
    InitProducerId => InitProducerIdRequest,
    ListOffsets => ListOffsetsRequest,
    Produce => ProduceRequest,
    Fetch => FetchRequest,
    FindCoordinator => FindCoordinatorRequest,
    JoinGroup => JoinGroupRequest,
    SyncGroup => SyncGroupRequest,
    Heartbeat => HeartbeatRequest,
    LeaveGroup => LeaveGroupRequest,
    OffsetCommit => OffsetCommitRequest,
    OffsetFetch => OffsetFetchRequest,
    DescribeGroups => DescribeGroupsRequest,
    ListGroups => ListGroupsRequest,
    DeleteGroups => DeleteGroupsRequest,
    OffsetDelete => OffsetDeleteRequest,
    ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest,
    ConsumerGroupDescribe => ConsumerGroupDescribeRequest,
}

/// Encodes a request frame body (header + request, no size prefix).
pub fn encode_request<R: Encodable>(key: ApiKey, version: i16, req: &R) -> Option<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7);
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    req.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// A frame, parsed. (Requests are parsed one at a time per connection and
/// moved straight into their handler, so the size difference is harmless.)
#[allow(clippy::large_enum_variant)]
pub enum Parsed {
    Request(Req, Body),
    /// ApiVersions at a version newer than served: answered with error 35.
    UnsupportedApiVersions {
        correlation_id: i32,
    },
}

/// Parses one request frame (without its size prefix). Anything that is not
/// a well-formed request of an implemented API at a served version is a
/// `Close` (except a too-new ApiVersions, which Kafka answers).
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
        spec.key.request_header_version(version)
    };
    let header: RequestHeader = decode(&mut frame, header_version)?;
    if version < spec.min || version > spec.max {
        if spec.key == ApiKey::ApiVersions {
            return Ok(Parsed::UnsupportedApiVersions {
                correlation_id: header.correlation_id,
            });
        }
        return Err(Close("unsupported API version"));
    }
    let body = decode_body(spec.key, &mut frame, version)?;
    Ok(Parsed::Request(
        Req {
            key: spec.key,
            version,
            header,
            frame_bytes,
            peer: None,
        },
        body,
    ))
}

async fn dispatch(
    shard: Rc<Shard>,
    peer: Option<std::net::SocketAddr>,
    frame: Bytes,
) -> Result<Reply, Close> {
    let (req, body) = match parse_request(frame)? {
        Parsed::Request(mut req, body) => {
            req.peer = peer;
            (req, body)
        }
        Parsed::UnsupportedApiVersions { correlation_id } => {
            return Ok(Reply::Now(api_versions::unsupported(correlation_id)));
        }
    };
    let corr = req.header.correlation_id;
    let version = req.version;
    macro_rules! now {
        ($module:ident, $body:expr) => {{
            let resp = $module::handle(&shard, &req, $body).await;
            match encode(corr, version, &resp) {
                Some(frame) => Ok(Reply::Now(Some(frame))),
                // Never skip a response silently: the client would pair the
                // next response with this request.
                None => Err(Close("response could not be encoded")),
            }
        }};
    }
    match body {
        Body::ApiVersions(b) => now!(api_versions, b),
        Body::Metadata(b) => now!(metadata, b),
        Body::CreateTopics(b) => now!(create_topics, b),
        Body::DeleteTopics(b) => now!(delete_topics, b),
        Body::DeleteRecords(b) => now!(delete_records, b),
        Body::CreatePartitions(b) => now!(create_partitions, b),
        Body::DescribeCluster(b) => now!(describe_cluster, b),
        Body::DescribeConfigs(b) => now!(describe_configs, b),
        Body::InitProducerId(b) => now!(init_producer_id, b),
        Body::ListOffsets(b) => now!(list_offsets, b),
        // A JoinGroup or SyncGroup may wait for the rebalance; like Kafka,
        // the connection's next request waits behind it.
        Body::FindCoordinator(b) => now!(find_coordinator, b),
        Body::JoinGroup(b) => now!(join_group, b),
        Body::SyncGroup(b) => now!(sync_group, b),
        Body::Heartbeat(b) => now!(heartbeat, b),
        Body::LeaveGroup(b) => now!(leave_group, b),
        Body::OffsetCommit(b) => now!(offset_commit, b),
        Body::OffsetFetch(b) => now!(offset_fetch, b),
        Body::DescribeGroups(b) => now!(describe_groups, b),
        Body::ListGroups(b) => now!(list_groups, b),
        Body::DeleteGroups(b) => now!(delete_groups, b),
        Body::OffsetDelete(b) => now!(offset_delete, b),
        Body::ConsumerGroupHeartbeat(b) => now!(consumer_group_heartbeat, b),
        Body::ConsumerGroupDescribe(b) => now!(consumer_group_describe, b),
        Body::Produce(b) => {
            let later = produce::handle(&shard, &req, b).await;
            Ok(Reply::Later(
                async move { later.await.and_then(|resp| encode(corr, version, &resp)) }
                    .boxed_local(),
            ))
        }
        Body::Fetch(b) => {
            let shard = shard.clone();
            Ok(Reply::Later(
                async move {
                    let (reply, grants) = fetch::handle(&shard, &req, b).await;
                    let frame = reply.encode(corr, version);
                    drop(grants);
                    frame
                }
                .boxed_local(),
            ))
        }
    }
}

/// kafka-protocol's own version range for a key, to check the table.
pub fn library_versions(key: ApiKey) -> (i16, i16) {
    let v = key.valid_versions();
    (v.min, v.max)
}

/// Helpers shared by handlers.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_owned())
}

/// A group's `authorized_operations` in DescribeGroups and
/// ConsumerGroupDescribe: READ 3, DELETE 6, DESCRIBE 8 as bits when asked
/// for, Kafka's "not asked" value otherwise.
pub fn group_operations(asked: bool) -> i32 {
    if asked {
        (1 << 3) | (1 << 6) | (1 << 8)
    } else {
        i32::MIN
    }
}

/// The group coordinator, if this agent coordinates `group_id`:
/// INVALID_GROUP_ID for an empty id, NOT_COORDINATOR when another agent
/// coordinates it.
pub fn group_coordinator<'a>(
    shard: &'a Shard,
    group_id: &str,
) -> Result<&'a crate::groups::Groups, crate::error::ErrorCode> {
    // PostgreSQL text cannot hold NUL: such ids are refused, not stored.
    if group_id.is_empty() || group_id.contains('\0') {
        return Err(crate::error::ErrorCode::InvalidGroupId);
    }
    if !shard.agent.owns_group(group_id) {
        return Err(crate::error::ErrorCode::NotCoordinator);
    }
    Ok(shard.agent.groups())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_within_the_library_and_unique() {
        for (i, a) in APIS.iter().enumerate() {
            let (lo, hi) = library_versions(a.key);
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

/// Feeds one arbitrary frame through everything a shard does with untrusted
/// bytes before touching state: header and body decode, then produce batch
/// validation. For fuzzers; it must never panic or abort.
pub fn fuzz_frame(data: &[u8]) {
    if let Ok(Parsed::Request(_, Body::Produce(p))) = parse_request(Bytes::copy_from_slice(data)) {
        for t in p.topic_data {
            for d in t.partition_data {
                if let Some(r) = d.records {
                    let _ = crate::records::validate_produce_records(&r, 1 << 20);
                }
            }
        }
    }
}

/// Hostile-input tests: every served API and version, then mutated,
/// truncated and random frames. None may panic a decoder; each either
/// parses or closes the connection.
#[cfg(test)]
mod hostile_input {
    use super::*;
    use std::sync::atomic::Ordering;

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn seeds() -> Vec<Bytes> {
        let mut out = Vec::new();
        for a in APIS {
            for v in a.min..=a.max {
                let frame = encode_default_request(a.key, v).expect("default request encodes");
                assert!(
                    matches!(parse_request(frame.clone()), Ok(Parsed::Request(..))),
                    "{:?} v{v} default request parses",
                    a.key
                );
                out.push(frame);
            }
        }
        // A produce request with a real batch, for the records path too.
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let batch = Bytes::from(crate::records::tests::batch(3, 3));
        for v in [3i16, 9, 13] {
            let req = kafka_protocol::messages::ProduceRequest::default()
                .with_acks(-1)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(kafka_protocol::messages::TopicName(str_bytes("t")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone()))])]);
            out.push(encode_request(ApiKey::Produce, v, &req).expect("produce encodes"));
        }
        out
    }

    fn exercise(frame: Bytes) {
        fuzz_frame(&frame);
    }

    #[test]
    fn mutated_truncated_and_random_frames_never_panic() {
        let before = DECODER_PANICS.load(Ordering::Relaxed);
        let seeds = seeds();
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for round in 0..60_000u32 {
            let seed = &seeds[(rng.next() as usize) % seeds.len()];
            let mut f = seed.to_vec();
            match round % 4 {
                0 => {
                    for _ in 0..1 + rng.next() % 4 {
                        let i = (rng.next() as usize) % f.len();
                        f[i] = rng.next() as u8;
                    }
                }
                1 => f.truncate((rng.next() as usize) % (f.len() + 1)),
                2 => {
                    // Lengths and counts set to extremes.
                    let i = (rng.next() as usize) % f.len();
                    for (k, b) in [0xffu8, 0xff, 0xff, 0xf0].iter().enumerate() {
                        if i + k < f.len() {
                            f[i + k] = *b;
                        }
                    }
                }
                _ => {
                    let n = (rng.next() % 64) as usize;
                    f = (0..n).map(|_| rng.next() as u8).collect();
                    if n >= 4 && rng.next().is_multiple_of(2) {
                        // Keep a valid api key and version to get past the header.
                        let a = &APIS[(rng.next() as usize) % APIS.len()];
                        f[..2].copy_from_slice(&(a.key as i16).to_be_bytes());
                        f[2..4].copy_from_slice(&a.max.to_be_bytes());
                    }
                }
            }
            exercise(Bytes::from(f));
        }
        assert_eq!(
            DECODER_PANICS.load(Ordering::Relaxed),
            before,
            "a decoder panicked (see stderr)"
        );
    }
}
