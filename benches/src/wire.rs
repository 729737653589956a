//! Kafka wire plumbing for the load generator: frames, one-shot requests and
//! the admin calls a run needs (create topics, wait for leaders, list
//! offsets).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest,
    RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The reading half of a broker connection (TCP, or TLS over it).
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Set by `--tls-ca`: every connection is TLS, trusting that CA (datum-mq's
/// TLS settings and handshake).
static TLS: std::sync::OnceLock<datum_mq::TlsSettings> = std::sync::OnceLock::new();

/// Set by `--sasl-plain USER:PASSWORD`: every connection logs in with
/// SASL/PLAIN first (a SASL_PLAINTEXT listener, or SASL_SSL with
/// `--tls-ca`).
static SASL_PLAIN: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

/// Makes every connection from now on log in as `user_password`
/// ("USER:PASSWORD") with SASL/PLAIN.
pub fn use_sasl_plain(user_password: &str) -> Result<()> {
    let Some((user, password)) = user_password.split_once(':') else {
        bail!("--sasl-plain takes USER:PASSWORD");
    };
    let _ = SASL_PLAIN.set((user.to_owned(), password.to_owned()));
    Ok(())
}

/// Makes every connection from now on TLS, trusting the PEM CA in `ca`.
pub fn use_tls(ca: &std::path::Path) -> Result<()> {
    let settings = datum_mq::TlsSettings::new().with_ca_pem_file(ca);
    settings.client_config()?; // reads the CA now: a bad file fails the run at once
    let _ = TLS.set(settings);
    Ok(())
}

/// Largest response frame accepted (a fetch of many partitions).
pub const RESPONSE_BYTES_MAX: usize = 512 << 20;
pub const CLIENT_ID: &str = "rutomq-bench";

pub const PRODUCE_VERSION: i16 = 9;
pub const FETCH_VERSION: i16 = 12;
const LIST_OFFSETS_VERSION: i16 = 7;
const METADATA_VERSION: i16 = 12;
const CREATE_TOPICS_VERSION: i16 = 5;
const CREATE_PARTITIONS_VERSION: i16 = 3;

/// Partitions created per admin request at most. Apache Kafka (KRaft)
/// refuses an operation of more than 10,000 metadata records
/// (POLICY_VIOLATION, "excessively large batch operation"): a topic of
/// 10,000 partitions takes 10,001. Larger topics are created at this size
/// and grown in steps, as a Kafka operator would with `kafka-topics --alter
/// --partitions`, and many topics go in groups; every broker gets the same
/// requests.
const PARTITIONS_PER_REQUEST_MAX: i32 = 5_000;

pub async fn connect(addr: &str) -> Result<(Reader, Writer)> {
    let s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    s.set_nodelay(true)?;
    let (mut r, mut w): (Reader, Writer) = match TLS.get() {
        None => {
            let (r, w) = s.into_split();
            (Box::new(r), Box::new(w))
        }
        Some(tls) => {
            let s = datum_mq::native::tls::handshake(s, addr, tls)
                .await
                .with_context(|| format!("TLS handshake with {addr}"))?;
            let (r, w) = tokio::io::split(s);
            (Box::new(r), Box::new(w))
        }
    };
    if let Some((user, password)) = SASL_PLAIN.get() {
        login(&mut r, &mut w, user, password)
            .await
            .with_context(|| format!("SASL/PLAIN login to {addr}"))?;
    }
    Ok((r, w))
}

/// SaslHandshake v1 and SaslAuthenticate v2 with a PLAIN token.
async fn login(r: &mut Reader, w: &mut Writer, user: &str, password: &str) -> Result<()> {
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let resp = exchange(r, w, 1, 1, &handshake).await?;
    if resp.error_code != 0 {
        bail!("SaslHandshake: error {}", resp.error_code);
    }
    let token = Bytes::from(format!("\0{user}\0{password}").into_bytes());
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(token);
    let resp = exchange(r, w, 2, 2, &auth).await?;
    if resp.error_code != 0 {
        bail!(
            "SaslAuthenticate: error {} {:?}",
            resp.error_code,
            resp.error_message
        );
    }
    Ok(())
}

/// One request and its response on a connection (nothing else in flight).
async fn exchange<R: Request>(
    r: &mut Reader,
    w: &mut Writer,
    correlation_id: i32,
    version: i16,
    req: &R,
) -> Result<R::Response> {
    w.write_all(&encode_frame(correlation_id, version, req)?)
        .await?;
    w.flush().await?;
    let (corr, body) = read_frame(r).await?;
    if corr != correlation_id {
        bail!("correlation id {corr}, expected {correlation_id}");
    }
    decode_response::<R>(body, version)
}

/// Encodes a whole request frame (length prefix included).
pub fn encode_frame<R: Request>(correlation_id: i32, version: i16, req: &R) -> Result<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, R::header_version(version))?;
    req.encode(&mut buf, version)?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// Reads one response frame; returns its correlation id and the rest.
pub async fn read_frame(r: &mut Reader) -> Result<(i32, Bytes)> {
    let len = r.read_i32().await.context("read response length")?;
    if len < 4 || len as usize > RESPONSE_BYTES_MAX {
        bail!("response frame of {len} bytes");
    }
    let mut buf = BytesMut::zeroed(len as usize);
    r.read_exact(&mut buf).await.context("read response")?;
    let mut b = buf.freeze();
    let corr = b.get_i32();
    Ok((corr, b))
}

/// Decodes a response body after its correlation id.
pub fn decode_response<R: Request>(mut body: Bytes, version: i16) -> Result<R::Response> {
    if R::Response::header_version(version) >= 1 {
        // Tagged fields of the flexible response header.
        let n = read_uvarint(&mut body)?;
        for _ in 0..n {
            read_uvarint(&mut body)?;
            let len = read_uvarint(&mut body)? as usize;
            if body.remaining() < len {
                bail!("short response header");
            }
            body.advance(len);
        }
    }
    R::Response::decode(&mut body, version)
}

fn read_uvarint(b: &mut Bytes) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !b.has_remaining() {
            bail!("short varint");
        }
        let x = b.get_u8();
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    bail!("varint too long")
}

/// One request, one response, on a connection of its own.
pub async fn call<R: Request>(addr: &str, version: i16, req: &R) -> Result<R::Response> {
    let (mut r, mut w) = connect(addr).await?;
    exchange(&mut r, &mut w, 1, version, req).await
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// Creates the topics (an existing one is fine) and waits until every
/// partition has a leader. No request asks for more than
/// [`PARTITIONS_PER_REQUEST_MAX`] partitions: topics go in groups, and a
/// topic larger than that is created at that size and grown in steps.
pub async fn create_topics(
    addr: &str,
    topics: &[String],
    partitions: i32,
    configs: &[(String, String)],
) -> Result<()> {
    let first = partitions.min(PARTITIONS_PER_REQUEST_MAX);
    let per_request = (PARTITIONS_PER_REQUEST_MAX / first).max(1) as usize;
    let mut created = Vec::new();
    for group in topics.chunks(per_request) {
        created.extend(create_some(addr, group, first, configs).await?);
    }
    // Only topics this run created are grown: an existing one keeps its
    // count (wait_for_leaders says so if it is not `partitions`).
    let mut count = first;
    while count < partitions {
        let next = partitions.min(count + PARTITIONS_PER_REQUEST_MAX);
        let per_request = (PARTITIONS_PER_REQUEST_MAX / (next - count)).max(1) as usize;
        for group in created.chunks(per_request) {
            grow_topics(addr, group, next).await?;
        }
        count = next;
    }
    wait_for_leaders(addr, topics, partitions).await
}

/// One CreateTopics request; returns the topics it created (not those that
/// existed).
async fn create_some(
    addr: &str,
    topics: &[String],
    partitions: i32,
    configs: &[(String, String)],
) -> Result<Vec<String>> {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(topic_name(t))
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(Some(StrBytes::from_string(v.clone())))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let resp = call(addr, CREATE_TOPICS_VERSION, &req).await?;
    let mut created = Vec::new();
    for t in resp.topics {
        match t.error_code {
            0 => created.push(t.name.0.to_string()),
            36 => {} // TOPIC_ALREADY_EXISTS
            code => bail!(
                "create topic {}: error {code} {}",
                t.name.0,
                t.error_message.as_deref().unwrap_or("")
            ),
        }
    }
    Ok(created)
}

/// Raises every topic in `topics` to `count` partitions (CreatePartitions).
async fn grow_topics(addr: &str, topics: &[String], count: i32) -> Result<()> {
    let req = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatePartitionsTopic::default()
                        .with_name(topic_name(t))
                        .with_count(count)
                        // null: Kafka refuses an empty list as an
                        // assignment of no partitions
                        .with_assignments(None)
                })
                .collect(),
        );
    let resp = call(addr, CREATE_PARTITIONS_VERSION, &req).await?;
    for r in resp.results {
        if r.error_code != 0 {
            bail!(
                "grow topic {} to {count} partitions: error {} {}",
                r.name.0,
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            );
        }
    }
    Ok(())
}

async fn wait_for_leaders(addr: &str, topics: &[String], partitions: i32) -> Result<()> {
    let req = MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
            .collect(),
    ));
    for _ in 0..300 {
        let resp = call(addr, METADATA_VERSION, &req).await?;
        let ready = resp.topics.iter().all(|t| {
            t.error_code == 0
                && t.partitions.len() == partitions as usize
                && t.partitions
                    .iter()
                    .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
        });
        // Metadata can name a leader before it serves the partition: ask
        // every partition for its offsets too.
        if ready && resp.topics.len() == topics.len() {
            let parts: Vec<(String, i32)> = topics
                .iter()
                .flat_map(|t| (0..partitions).map(move |p| (t.clone(), p)))
                .collect();
            if list_offsets(addr, &parts, -1).await.is_ok() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("topics {topics:?} have no leaders after 30 s")
}

/// Earliest (`-2`) or latest (`-1`) offsets of `parts`, in their order.
pub async fn list_offsets(addr: &str, parts: &[(String, i32)], which: i64) -> Result<Vec<i64>> {
    let topics = rutomq_bench::by_topic(parts.iter().map(|(t, p)| {
        (
            t.clone(),
            ListOffsetsPartition::default()
                .with_partition_index(*p)
                .with_timestamp(which),
        )
    }))
    .into_iter()
    .map(|(t, partitions)| {
        ListOffsetsTopic::default()
            .with_name(topic_name(&t))
            .with_partitions(partitions)
    })
    .collect();
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(topics);
    let resp = call(addr, LIST_OFFSETS_VERSION, &req).await?;
    parts
        .iter()
        .map(|(t, p)| {
            let part = resp
                .topics
                .iter()
                .filter(|x| x.name.0.as_str() == t)
                .flat_map(|x| x.partitions.iter())
                .find(|x| x.partition_index == *p)
                .with_context(|| format!("no offset for {t}/{p}"))?;
            if part.error_code != 0 {
                bail!("list offsets {t}/{p}: error {}", part.error_code);
            }
            Ok(part.offset)
        })
        .collect()
}
