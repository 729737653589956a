//! The state one agent shares with all its shards: configuration, the
//! metadata and storage handles, its identity and view of the live agents,
//! the flush windows and the coordinators. Plain shared state: it is built
//! and torn down by `serve`, and imports nothing that uses it.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};

use rutomq_meta::{AgentRecord, Endpoint, Meta};
use rutomq_storage::Storage;
use uuid::Uuid;

use crate::coordinator::owner_of;
use crate::flush::{Flush, SealedTx};
use crate::groups::Groups;
use crate::metrics::ShardMetrics;
use crate::security::{Credentials, SecurityConfig};

#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub rack: Option<String>,
    /// Kafka's `transaction.max.timeout.ms`.
    pub transaction_max_timeout_ms: i32,
    /// Kafka's `transactional.id.expiration.ms`.
    pub transactional_id_expiration_ms: i64,
    /// The one log directory DescribeLogDirs reports: where the records
    /// are (the object store's URL, without credentials or query).
    pub log_dir: String,
    /// Where pushed client telemetry is also written (`--client-telemetry-topic`).
    pub client_telemetry_topic: Option<String>,
    /// Kafka's read-only broker configs a flag sets (the bounds of group
    /// configs), by name.
    pub read_only: Vec<(&'static str, i64)>,
    /// Fetch checks the CRC of batches read back (`--read-verify-crc`).
    pub read_verify_crc: bool,
    /// Read-ahead depth in fetches (`--read-ahead-fetches`).
    pub read_ahead_fetches: usize,
}

pub struct Agent {
    pub cfg: AgentConfig,
    pub meta: Meta,
    pub storage: Storage,
    pub agent_id: i32,
    pub cluster_id: String,
    pub cluster: RwLock<Vec<AgentRecord>>,
    /// The flush windows: clock, membership, stage times.
    pub flush: Arc<Flush>,
    /// The sealed queue towards the pipeline; dropped with the agent, which
    /// lets the pipeline finish.
    pub sealed_tx: SealedTx,
    pub stopping: AtomicBool,
    /// Each shard's metrics, registered when the shard starts.
    pub shard_metrics: Mutex<Vec<Arc<ShardMetrics>>>,
    /// The group coordinator (set once, right after the agent is built:
    /// it asks the agent which groups it coordinates).
    pub groups: std::sync::OnceLock<Groups>,
    /// Transaction coordinator counters, for `/metrics`.
    pub txn_stats: crate::metrics::TxnStats,
    /// What the compactor did, for `/metrics`.
    pub compaction_stats: Arc<crate::metrics::CompactionStats>,
    /// Listeners and SASL settings.
    pub security: SecurityConfig,
    /// The SCRAM credentials, for logins.
    pub credentials: Arc<Credentials>,
    /// The TLS listeners' certificate and principal mapping.
    pub tls: Option<Arc<crate::security::tls::Tls>>,
    /// The ACLs and their settings, with `--authorizer acl`.
    pub authorizer: Option<Arc<crate::security::authorizer::Authorizer>>,
    /// The client quotas and the sensors enforcing them.
    pub quotas: Arc<crate::quota::Quotas>,
    /// Broker, group and client-metrics configs set at runtime.
    pub dynamic: Arc<crate::dynamic::Dynamic>,
    /// Delegation tokens in force.
    pub tokens: Arc<crate::security::tokens::Tokens>,
    /// Client telemetry (KIP-714) pushed to this agent.
    pub telemetry: crate::telemetry::Telemetry,
    /// Which connection holds each share group member's share session.
    pub share_sessions: Arc<crate::share::sessions::Registry>,
}

impl Agent {
    /// The live agents, this one first if the list is still empty.
    pub fn live_agents(&self) -> Vec<AgentRecord> {
        let list = self.cluster.read().expect("cluster lock").clone();
        if list.is_empty() {
            vec![self.me()]
        } else {
            list
        }
    }

    /// The live agents' ids (Kafka's registered brokers, as manual replica
    /// assignments name them).
    pub fn live_agent_ids(&self) -> Vec<i32> {
        self.live_agents().iter().map(|a| a.agent_id).collect()
    }

    pub fn me(&self) -> AgentRecord {
        let listeners = self.endpoints();
        AgentRecord {
            agent_id: self.agent_id,
            host: listeners[0].host.clone(),
            port: listeners[0].port,
            rack: self.cfg.rack.clone(),
            listeners,
        }
    }

    /// This agent's listeners' advertised addresses.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.security
            .listeners
            .iter()
            .map(|l| Endpoint {
                name: l.name.clone(),
                host: l.advertised_host.clone(),
                port: l.advertised_port,
            })
            .collect()
    }

    /// The group coordinator.
    pub fn groups(&self) -> &Groups {
        self.groups
            .get()
            .expect("group coordinator started with the agent")
    }

    /// The live agent that coordinates the group (or other coordinator key)
    /// `key`: rendezvous hashing, so only the keys of an agent that comes
    /// or goes move.
    pub fn coordinator_for(&self, key: &str) -> AgentRecord {
        owner_of(key, &self.live_agents())
            .cloned()
            .unwrap_or_else(|| self.me())
    }

    /// Whether this agent coordinates `group_id`.
    pub fn owns_group(&self, group_id: &str) -> bool {
        self.coordinator_for(group_id).agent_id == self.agent_id
    }

    /// Whether this agent applies retention to `topic_id`: the live agent
    /// that leads its partition 0 does (all of them while the list is
    /// unknown; a round missed or doubled during a membership change is
    /// harmless, every step being idempotent).
    pub fn retains(&self, topic_id: Uuid) -> bool {
        let agents = self.cluster.read().expect("cluster lock");
        agents.is_empty() || Self::leader_for(&agents, topic_id, 0) == self.agent_id
    }

    /// Whether this agent compacts `partition` of `topic_id`: its leader
    /// does (any agent, while the list is unknown: the partition's lease
    /// in PostgreSQL keeps passes one at a time).
    pub fn compacts(&self, topic_id: Uuid, partition: i32) -> bool {
        let agents = self.cluster.read().expect("cluster lock");
        agents.is_empty() || Self::leader_for(&agents, topic_id, partition) == self.agent_id
    }

    /// The agent that leads `partition` of `topic_id` in Metadata responses:
    /// stable hashing over the live agents, so clients spread their load.
    pub fn leader_for(agents: &[AgentRecord], topic_id: Uuid, partition: i32) -> i32 {
        let h = topic_id.as_u128() as u64 ^ (topic_id.as_u128() >> 64) as u64;
        let h = h
            .wrapping_add(partition as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        agents[(h >> 32) as usize % agents.len()].agent_id
    }
}

/// An object store's URL as DescribeLogDirs may show it: no user or
/// password, no query (where credentials could be).
pub fn log_dir_of(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or("");
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit('@').next().unwrap_or("");
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod log_dir_tests {
    use super::log_dir_of;

    #[test]
    fn credentials_and_queries_are_left_out() {
        assert_eq!(
            log_dir_of("file:///var/lib/rutomq/objects"),
            "file:///var/lib/rutomq/objects"
        );
        assert_eq!(log_dir_of("s3://bucket/prefix"), "s3://bucket/prefix");
        assert_eq!(
            log_dir_of("s3://key:secret@minio:9000/bucket/p?region=x&token=t#f"),
            "s3://minio:9000/bucket/p"
        );
        assert_eq!(log_dir_of("s3://bucket"), "s3://bucket");
    }
}
