//! The operator's commands (`rutomq topic|group|produce|consume|cluster`):
//! a Kafka client in the agent's binary, so one file on a node does what
//! operators otherwise reach for Kafka's scripts for. They speak the Kafka
//! protocol to any agent (datum-mq's native connection: the same SASL and
//! TLS as every client) and print tables for people or JSON for scripts.

mod cluster;
mod group;
mod output;
mod records;
mod topic;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use datum_mq::native::conn::Connection;
use datum_mq::{SaslMechanism, Security, TlsSettings};
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;

pub use output::{Format, Report, Table};

#[derive(Subcommand, Debug)]
pub enum CtlCommand {
    /// Create, list, describe, delete topics and change their configs.
    Topic(Topic),
    /// List and describe consumer groups (members, offsets, lag) and move
    /// their committed offsets.
    Group(Group),
    /// Write records read from standard input, one per line.
    Produce(records::ProduceArgs),
    /// Print a topic's records, one per line.
    Consume(records::ConsumeArgs),
    /// The cluster at a glance: agents, their health and every group's lag.
    Cluster(Cluster),
}

#[derive(Args, Debug)]
pub struct Topic {
    #[command(flatten)]
    conn: ConnArgs,
    #[command(subcommand)]
    cmd: topic::TopicCmd,
}

#[derive(Args, Debug)]
pub struct Group {
    #[command(flatten)]
    conn: ConnArgs,
    #[command(subcommand)]
    cmd: group::GroupCmd,
}

#[derive(Args, Debug)]
pub struct Cluster {
    #[command(flatten)]
    conn: ConnArgs,
    #[command(subcommand)]
    cmd: cluster::ClusterCmd,
}

/// How to reach the cluster and how to print; shared by every command.
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// Agents to start from, host:port[,host:port...] (any agent serves
    /// any request).
    #[arg(
        short = 'b',
        long,
        env = "RUTOMQ_BROKERS",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub brokers: String,
    /// `table` for people, `json` for scripts.
    #[arg(long, env = "RUTOMQ_FORMAT", default_value = "table", global = true)]
    pub format: Format,
    /// SASL user (SASL_PLAINTEXT, or SASL_SSL with --tls).
    #[arg(long, env = "RUTOMQ_USER", global = true)]
    pub user: Option<String>,
    /// SASL password (better given as RUTOMQ_PASSWORD than on the command
    /// line, where `ps` shows it).
    #[arg(long, env = "RUTOMQ_PASSWORD", hide_env_values = true, global = true)]
    pub password: Option<String>,
    /// SASL mechanism: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN.
    #[arg(
        long,
        env = "RUTOMQ_SASL_MECHANISM",
        default_value = "SCRAM-SHA-512",
        global = true
    )]
    pub sasl_mechanism: String,
    /// Connect with TLS.
    #[arg(long, env = "RUTOMQ_TLS", global = true)]
    pub tls: bool,
    /// PEM file of the CAs the agents' certificates chain to (default: the
    /// system's roots).
    #[arg(long, env = "RUTOMQ_TLS_CA", global = true)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// How long one request may take.
    #[arg(long, default_value_t = 30_000, global = true)]
    pub timeout_ms: u64,
}

impl ConnArgs {
    fn security(&self) -> Result<Security> {
        let tls = if self.tls {
            let mut t = TlsSettings::new();
            if let Some(ca) = &self.tls_ca {
                t = t.with_ca_pem_file(ca.clone());
            }
            Some(t)
        } else {
            None
        };
        let sasl = match (&self.user, &self.password) {
            (None, None) => None,
            (Some(u), Some(p)) => {
                let (username, password) = (u.clone(), p.clone());
                Some(match self.sasl_mechanism.to_ascii_uppercase().as_str() {
                    "PLAIN" => SaslMechanism::Plain { username, password },
                    "SCRAM-SHA-256" => SaslMechanism::ScramSha256 { username, password },
                    "SCRAM-SHA-512" => SaslMechanism::ScramSha512 { username, password },
                    other => bail!(
                        "--sasl-mechanism {other}: expected SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN"
                    ),
                })
            }
            _ => bail!("--user and --password go together"),
        };
        let security = match (sasl, tls) {
            (None, None) => Security::Plaintext,
            (None, Some(t)) => Security::Ssl(t),
            (Some(m), None) => Security::SaslPlaintext(m),
            (Some(m), Some(t)) => Security::SaslSsl(m, t),
        };
        security.validate()?;
        Ok(security)
    }
}

/// Runs one operator command to its end.
pub fn run(cmd: CtlCommand) -> Result<()> {
    // Two workers: the connections' tasks keep running (heartbeats, acks)
    // while the command's own task writes to a slow terminal or pipe.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match cmd {
            CtlCommand::Topic(t) => {
                let c = Client::connect(&t.conn).await?;
                topic::run(&c, t.cmd).await
            }
            CtlCommand::Group(g) => {
                let c = Client::connect(&g.conn).await?;
                group::run(&c, g.cmd).await
            }
            CtlCommand::Produce(p) => records::produce(p).await,
            CtlCommand::Consume(a) => {
                let c = Client::connect(&a.conn).await?;
                records::consume(&c, a).await
            }
            CtlCommand::Cluster(k) => {
                let c = Client::connect(&k.conn).await?;
                cluster::run(&c, k.cmd).await
            }
        }
    })
}

/// A connection to one agent of the cluster, and to others on demand
/// (partition leaders, group coordinators).
pub struct Client {
    conn: Connection,
    security: Security,
    timeout: Duration,
    format: Format,
    /// Connections by "host:port", the bootstrap one included.
    others: tokio::sync::Mutex<HashMap<String, Connection>>,
    /// --brokers, for finding an agent again.
    bootstrap: Vec<String>,
    /// The agents the last metadata answer named.
    known: tokio::sync::Mutex<Vec<String>>,
    /// Each group's coordinator once found ("host:port"): a command asks
    /// it several times (describe, offsets, commit).
    coordinators: tokio::sync::Mutex<HashMap<String, String>>,
}

const CLIENT_ID: &str = "rutomq-cli";

/// Versions the commands speak (within what rutomq and Kafka serve).
pub(crate) const METADATA: (i16, i16) = (4, 12);
const FIND_COORDINATOR: (i16, i16) = (1, 3);

impl Client {
    /// Connects to the first agent of `--brokers` that answers.
    pub async fn connect(args: &ConnArgs) -> Result<Client> {
        let security = args.security()?;
        let timeout = Duration::from_millis(args.timeout_ms.max(1));
        let mut last = None;
        let bootstrap = datum_mq::native::bootstrap_addrs(&args.brokers)?;
        for addr in &bootstrap {
            match datum_mq::connect(addr, &security, CLIENT_ID, timeout).await {
                Ok(conn) => {
                    return Ok(Client {
                        conn,
                        security,
                        timeout,
                        format: args.format,
                        others: Default::default(),
                        bootstrap: bootstrap.clone(),
                        known: Default::default(),
                        coordinators: Default::default(),
                    })
                }
                Err(e) => last = Some(anyhow!(e).context(format!("connecting to {addr}"))),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("no agent to connect to")))
    }

    /// The bootstrap connection.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// A connection to `addr` ("host:port"), opened once.
    pub async fn to(&self, addr: &str) -> Result<Connection> {
        if addr == self.conn.broker() && self.conn.is_alive() {
            return Ok(self.conn.clone());
        }
        let mut others = self.others.lock().await;
        if let Some(c) = others.get(addr).filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let c = datum_mq::connect(addr, &self.security, CLIENT_ID, self.timeout)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        others.insert(addr.to_owned(), c.clone());
        Ok(c)
    }

    /// Metadata of `topics` (all topics when None); never creates one.
    pub async fn metadata(&self, topics: Option<&[String]>) -> Result<MetadataResponse> {
        let md = self.conn.call(&metadata_request(topics), METADATA).await?;
        let mut known = self.known.lock().await;
        known.clear();
        known.extend(
            md.brokers
                .iter()
                .map(|b| datum_mq::native::host_port(&b.host, b.port)),
        );
        Ok(md)
    }

    /// Metadata of `topics` from any agent that answers: the bootstrap
    /// connection, then the --brokers list, then the agents the last
    /// answer named (the bootstrap agent may be the one restarting).
    pub async fn metadata_any(&self, topics: &[String]) -> Result<MetadataResponse> {
        let first = self.metadata(Some(topics)).await;
        let Err(mut last) = first else { return first };
        let mut addrs = self.bootstrap.clone();
        for k in self.known.lock().await.iter() {
            if !addrs.contains(k) {
                addrs.push(k.clone());
            }
        }
        for addr in addrs {
            let asked = async {
                let req = metadata_request(Some(topics));
                anyhow::Ok(self.to(&addr).await?.call(&req, METADATA).await?)
            };
            match asked.await {
                Ok(md) => return Ok(md),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The connection to `group`'s coordinator.
    pub async fn coordinator(&self, group: &str) -> Result<Connection> {
        let known = self.coordinators.lock().await.get(group).cloned();
        if let Some(addr) = known {
            return self.to(&addr).await;
        }
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(group.to_owned()))
            .with_key_type(0);
        let resp = self.conn.call(&req, FIND_COORDINATOR).await?;
        check(resp.error_code, resp.error_message.as_deref(), || {
            format!("finding the coordinator of group {group}")
        })?;
        let addr = datum_mq::native::host_port(&resp.host, resp.port);
        self.coordinators
            .lock()
            .await
            .insert(group.to_owned(), addr.clone());
        self.to(&addr).await
    }
}

/// What a metadata answer says of the agents and the partitions' leaders
/// (datum-mq's view, as its producer and consumer keep it).
pub fn cluster_of(md: &MetadataResponse) -> datum_mq::native::Cluster {
    let mut cluster = datum_mq::native::Cluster::default();
    cluster.apply(md.clone());
    cluster
}

/// A Metadata request for `topics` (all when None) that creates none.
fn metadata_request(topics: Option<&[String]>) -> MetadataRequest {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    MetadataRequest::default()
        .with_topics(topics.map(|ts| {
            ts.iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                })
                .collect()
        }))
        .with_allow_auto_topic_creation(false)
}

/// Kafka's name of an error code (`TOPIC_ALREADY_EXISTS`), as its tools
/// print it.
pub fn error_name(code: i16) -> String {
    use kafka_protocol::error::ResponseError;
    match ResponseError::try_from_code(code) {
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
        None => format!("ERROR_{code}"),
    }
}

/// Ok for code 0; otherwise the error with Kafka's name and message.
pub fn check(code: i16, message: Option<&str>, what: impl FnOnce() -> String) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    let name = error_name(code);
    match message.filter(|m| !m.is_empty()) {
        Some(m) => Err(anyhow!("{}: {name}: {m}", what())),
        None => Err(anyhow!("{}: {name}", what())),
    }
}

/// "name=value" into its two halves.
pub fn key_value(s: &str, flag: &str) -> Result<(String, String)> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("{flag} {s:?}: expected NAME=VALUE"))?;
    if k.is_empty() {
        bail!("{flag} {s:?}: empty name");
    }
    Ok((k.to_owned(), v.to_owned()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(super::error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(super::error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(super::error_name(-1), "UNKNOWN_SERVER_ERROR");
    }
}
