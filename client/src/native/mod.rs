//! The native backends: this crate's own protocol code.

pub mod conn;
pub mod consumer;
pub mod producer;
pub mod sasl;
pub mod tls;

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::error::{Error, Result};
use crate::settings::Security;
use conn::Connection;

/// Metadata versions this client speaks (v4 adds auto-creation control).
const METADATA_VERSIONS: (i16, i16) = (4, 12);
/// TCP connect timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens a connection to `addr` ("host:port").
pub async fn connect(
    addr: &str,
    security: &Security,
    client_id: &str,
    request_timeout: Duration,
) -> Result<Connection> {
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| Error::Timeout(format!("connecting to {addr}")))??;
    tcp.set_nodelay(true)?;
    let stream: Box<dyn conn::Stream> = match security {
        Security::Plaintext | Security::SaslPlaintext(_) => Box::new(tcp),
        Security::Ssl(t) | Security::SaslSsl(_, t) => {
            let handshake = tls::handshake(tcp, addr, t);
            Box::new(
                tokio::time::timeout(CONNECT_TIMEOUT, handshake)
                    .await
                    .map_err(|_| Error::Timeout(format!("TLS handshake with {addr}")))??,
            )
        }
    };
    let conn = Connection::start(stream, addr.to_owned(), client_id, request_timeout).await?;
    match security {
        Security::Plaintext | Security::Ssl(_) => {}
        Security::SaslPlaintext(m) | Security::SaslSsl(m, _) => {
            sasl::authenticate(&conn, m).await?
        }
    }
    Ok(conn)
}

/// The bootstrap list "h1:p1,h2:p2".
pub fn bootstrap_addrs(list: &str) -> Result<Vec<String>> {
    let addrs: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if addrs.is_empty() || addrs.iter().any(|a| !a.contains(':')) {
        return Err(Error::Config(format!(
            "bootstrap servers {list:?}: expected host:port[,host:port...]"
        )));
    }
    Ok(addrs)
}

/// "host:port", with an IPv6 literal in brackets.
pub fn host_port(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// What the client knows of the cluster.
#[derive(Debug, Default, Clone)]
pub struct Cluster {
    /// node id -> "host:port"
    pub brokers: HashMap<i32, String>,
    pub topics: HashMap<String, TopicInfo>,
    /// Topic id -> name (Metadata v10+).
    pub names: HashMap<uuid::Uuid, String>,
}

#[derive(Debug, Clone)]
pub struct TopicInfo {
    /// Leader node per partition index (-1: none now).
    pub leaders: Vec<i32>,
    /// Nil when the broker answered below Metadata v10.
    pub id: uuid::Uuid,
}

/// A ListOffsets request (as a consumer: replica -1) for the offset at
/// `timestamp` (-2 earliest, -1 latest) of each topic's partitions.
pub fn list_offsets_request<'a>(
    partitions: impl IntoIterator<Item = (&'a str, &'a [i32])>,
    timestamp: i64,
) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            partitions
                .into_iter()
                .map(|(t, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                        .with_partitions(
                            ps.iter()
                                .map(|p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(*p)
                                        .with_current_leader_epoch(-1)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// Asks `conn` for the metadata of `topics` (creating them when the broker
/// allows it).
pub async fn fetch_metadata(
    conn: &Connection,
    topics: &[String],
    allow_auto_topic_creation: bool,
) -> Result<MetadataResponse> {
    let req = MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(allow_auto_topic_creation);
    conn.call(&req, METADATA_VERSIONS).await
}

impl Cluster {
    /// "host:port" of `topic`'s `partition`'s leader, when known.
    pub fn leader_addr(&self, topic: &str, partition: i32) -> Option<&str> {
        let leader = *self
            .topics
            .get(topic)?
            .leaders
            .get(usize::try_from(partition).ok()?)?;
        self.brokers.get(&leader).map(String::as_str)
    }

    /// Merges a metadata answer. A topic the broker reports with an error
    /// is returned in the error list and left out.
    pub fn apply(&mut self, resp: MetadataResponse) -> Vec<(String, i16)> {
        for b in resp.brokers {
            self.brokers
                .insert(b.node_id.0, host_port(b.host.as_str(), b.port));
        }
        let mut errors = Vec::new();
        for t in resp.topics {
            let Some(name) = t.name.map(|n| n.0.to_string()) else {
                continue;
            };
            if t.error_code != 0 {
                // A retriable error (leader election, creation under way)
                // keeps what was known; the next refresh asks again.
                if !Error::kafka(t.error_code, "").is_retriable() {
                    self.topics.remove(&name);
                }
                errors.push((name, t.error_code));
                continue;
            }
            let n = t.partitions.len();
            let mut leaders = vec![-1; n];
            for p in t.partitions {
                let i = p.partition_index;
                if i >= 0 && (i as usize) < n {
                    leaders[i as usize] = if p.error_code == 0 { p.leader_id.0 } else { -1 };
                }
            }
            if !t.topic_id.is_nil() {
                self.names.insert(t.topic_id, name.clone());
            }
            self.topics.insert(
                name,
                TopicInfo {
                    leaders,
                    id: t.topic_id,
                },
            );
        }
        errors
    }
}
