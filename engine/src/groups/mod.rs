//! The group coordinator: consumer groups whose state lives in PostgreSQL.
//!
//! Each group is coordinated by one live agent, chosen by rendezvous
//! hashing of the group id over the live agents
//! ([`crate::coordinator::owner_of`]); the others answer NOT_COORDINATOR. The coordinating
//! agent loads the group from PostgreSQL on first use, which bumps the
//! group's coordinator epoch: an agent that lost the group (its view of the
//! live agents was stale, or it was presumed dead) is fenced on its next
//! write and drops the group.
//!
//! One thread runs every group of the agent: a single loop owns all group
//! state (no locks), applies calls in arrival order, and writes what must be
//! durable to PostgreSQL through the metadata thread, one write at a time
//! per group, so writes land in the order they were decided. Calls that
//! wait (JoinGroup, SyncGroup) hold a oneshot the loop answers later. The
//! loaded groups, their write queues and timers, and the thread are the
//! shared [`crate::coordinator`] machinery; this module is its group user.
//!
//! Durable: the group at the end of each rebalance (members, their
//! subscriptions and assignments), when it becomes empty, and committed
//! offsets. Not durable: heartbeats and a rebalance in progress. An agent
//! taking over a group restarts every member's session timer, so members
//! that died with the previous coordinator are removed after their session
//! timeout, and live ones rejoin.
//!
//! Layout: [`calls`] (what the coordinator is asked and answers),
//! [`Groups`] in `handle` (the shards' handle), `coordinator` (the loop),
//! `apply` (a call applied to a group), `writes` (a group's writes to
//! PostgreSQL), `state` (a loaded group of either kind), `stored` (the
//! stored format of both kinds), [`classic`], [`consumer`], [`share`] and
//! [`streams`] (the protocols' group logic).

mod apply;
pub mod calls;
pub mod classic;
pub mod consumer;
mod coordinator;
mod handle;
mod sets;
pub mod share;
mod state;
mod stored;
pub mod streams;
mod writes;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

pub use crate::coordinator::Owns;
pub use calls::{
    CommitArgs, ConsumerDescription, Failed, GroupDescription, JoinArgs, JoinResult, JoinedMember,
    LeaveMember, Listed, MemberDescription, ShareDescription, StreamsDescription, SyncArgs,
    SyncResult, TxnTarget, Written,
};
pub use handle::Groups;

/// An idle empty group stays in memory this long after its last call.
pub const IDLE_UNLOAD: Duration = Duration::from_secs(30);
/// How often ownership, idleness and orphaned groups are checked.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// How often consumer groups' subscribed topics are re-read (new topics,
/// new partitions).
pub const TOPICS_REFRESH: Duration = Duration::from_secs(2);
/// How often groups whose coordinator died are looked for.
pub const ADOPT_INTERVAL: Duration = Duration::from_secs(5);
/// How often expired offsets are removed (Kafka's
/// offsets.retention.check.interval.ms).
pub const OFFSETS_RETENTION_CHECK: Duration = Duration::from_secs(600);

/// Kafka's group settings, named after the broker configs.
#[derive(Clone, Debug)]
pub struct GroupsConfig {
    /// group.initial.rebalance.delay.ms
    pub initial_rebalance_delay: Duration,
    /// group.min.session.timeout.ms
    pub session_timeout_min: Duration,
    /// group.max.session.timeout.ms
    pub session_timeout_max: Duration,
    /// group.max.size
    pub group_size_max: usize,
    /// offsets.retention.minutes
    pub offsets_retention: Duration,
    /// How often consumer lag is measured for /metrics (None: never).
    pub lag_interval: Option<Duration>,
    /// offset.metadata.max.bytes
    pub offset_metadata_bytes_max: usize,
    /// group.consumer.session.timeout.ms (KIP-848 groups)
    pub consumer_session_timeout: Duration,
    /// group.consumer.heartbeat.interval.ms (KIP-848 groups)
    pub consumer_heartbeat_interval: Duration,
    /// Which topics a member's subscription regex may match.
    pub topic_access: TopicAccess,
    /// Share groups' settings.
    pub share: share::ShareConfig,
    /// Streams groups' settings.
    pub streams: streams::StreamsConfig,
}

/// Which topics a consumer group member's regular expression may match:
/// with an authorizer, only those its principal may describe (Kafka 4,
/// KAFKA-18813); without one, any.
#[derive(Clone, Default)]
pub struct TopicAccess(pub Option<std::sync::Arc<crate::security::authorizer::Authorizer>>);

impl TopicAccess {
    /// Whether `who` (principal, host) may match a topic, decided against
    /// one snapshot of the ACLs (taken once for all the topics a regex is
    /// tried on); a member whose principal is not known (loaded from an
    /// old record) matches nothing until it heartbeats, when an authorizer
    /// is configured.
    pub fn matcher<'a>(&'a self, who: Option<&'a (String, String)>) -> impl Fn(&str) -> bool + 'a {
        use crate::security::acl::{op, resource};
        let decide = self.0.as_ref().map(|a| (a.acls(), &a.cfg));
        move |topic| match (&decide, who) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some((acls, cfg)), Some((principal, host))) => {
                acls.authorize(cfg, principal, host, op::DESCRIBE, resource::TOPIC, topic)
            }
        }
    }
}

impl std::fmt::Debug for TopicAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TopicAccess(authorizer)"
        } else {
            "TopicAccess(open)"
        })
    }
}

impl Default for GroupsConfig {
    fn default() -> Self {
        GroupsConfig {
            initial_rebalance_delay: Duration::from_millis(3000),
            session_timeout_min: Duration::from_millis(6000),
            session_timeout_max: Duration::from_millis(1_800_000),
            group_size_max: 1000,
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
            offset_metadata_bytes_max: 4096,
            lag_interval: None,
            consumer_session_timeout: Duration::from_millis(45_000),
            consumer_heartbeat_interval: Duration::from_millis(5_000),
            topic_access: TopicAccess::default(),
            share: share::ShareConfig::default(),
            streams: streams::StreamsConfig::default(),
        }
    }
}

/// Counters for `/metrics`.
#[derive(Default, Debug)]
pub struct GroupStats {
    pub rebalances: AtomicU64,
    pub members_expired: AtomicU64,
    pub offset_commits: AtomicU64,
    pub groups_loaded: AtomicU64,
    pub fenced: AtomicU64,
    /// Consumer lag of the groups this agent coordinates, as last measured.
    pub lags: std::sync::Mutex<Vec<rutomq_meta::groups::GroupLag>>,
}

impl GroupStats {
    /// `/metrics` lines of the consumer lag gauges: one series per group
    /// and topic, on the agent that coordinates the group (so summing over
    /// agents counts each group once).
    pub fn render_lags(&self, out: &mut String) {
        use std::fmt::Write as _;
        let lags = self.lags.lock().expect("stats lock");
        for (name, help, pick) in [
            (
                "rutomq_consumer_group_lag",
                "Records between a group's committed offsets and the high watermarks, per topic (groups this agent coordinates).",
                0,
            ),
            (
                "rutomq_consumer_group_lag_max",
                "The largest lag of one partition, per group and topic.",
                1,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for l in lags.iter() {
                let v = if pick == 0 { l.lag } else { l.lag_max };
                let _ = writeln!(
                    out,
                    "{name}{{group=\"{}\",topic=\"{}\"}} {v}",
                    crate::metrics::label_value(&l.group_id),
                    l.topic
                );
            }
        }
    }
}
