//! One consumer group of the KIP-848 protocol (ConsumerGroupHeartbeat): the
//! coordinator assigns partitions itself (server-side `uniform` or `range`
//! assignor) and every member reconciles towards its target with epochs.
//!
//! - The group epoch moves whenever membership, subscriptions or the
//!   partitions of subscribed topics change; the target assignment is then
//!   computed for that epoch (the assignment epoch).
//! - A member moves to the assignment epoch only after it has revoked the
//!   partitions its target no longer holds; it is given a partition only
//!   when no other member still owns it. So no partition is ever owned by
//!   two members at once.
//! - A member that stops heartbeating for the session timeout, or does not
//!   revoke within its rebalance timeout, is removed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rutomq_meta::groups::StoredGroup;
use uuid::Uuid;

pub(super) use super::sets::{count, intersects, minus};
use super::stored::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, GroupType,
    Member as StoredMember, Stored,
};
use super::GroupsConfig;
use crate::error::ErrorCode;
use crate::limits::{SUBSCRIPTION_REGEX_BYTES_MAX, SUBSCRIPTION_REGEX_COMPILED_BYTES_MAX};

mod assign;
mod heartbeat;
#[cfg(test)]
mod tests;

/// Partitions by topic id.
pub type Partitions = super::sets::Keyed<Uuid>;

/// Subscribed topics as the coordinator knows them: name → (id, partitions).
pub type TopicsView = HashMap<String, (Uuid, i32)>;

/// Compiles a subscription regex to match whole topic names (as Kafka's
/// RE2/J `matches()`); `None` for the empty pattern.
pub fn compile_regex(pattern: &str) -> Result<Option<(String, regex::Regex)>, String> {
    if pattern.is_empty() {
        return Ok(None);
    }
    if pattern.len() > SUBSCRIPTION_REGEX_BYTES_MAX {
        return Err(format!(
            "the regular expression is longer than {SUBSCRIPTION_REGEX_BYTES_MAX} bytes"
        ));
    }
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(SUBSCRIPTION_REGEX_COMPILED_BYTES_MAX)
        .build()
        .map(|r| Some((pattern.to_owned(), r)))
        .map_err(|e| format!("invalid regular expression {pattern:?}: {e}"))
}

/// The server-side assignors (group.consumer.assignors); the first is the
/// default.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

pub struct HeartbeatArgs {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    /// v1: a regular expression (RE2 syntax, matched against whole topic
    /// names); `Some("")` drops it, `None` leaves it as it is.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
    /// The principal and host its subscription regex is resolved as.
    pub principal: (String, String),
    /// v0 lets the coordinator pick the member id on join.
    pub version: i16,
    /// The group's own `consumer.session.timeout.ms` and
    /// `consumer.heartbeat.interval.ms` (group configs), when it sets them;
    /// the coordinator's otherwise.
    pub session_timeout: Option<std::time::Duration>,
    pub heartbeat_interval: Option<std::time::Duration>,
}

#[derive(Clone, Debug)]
pub struct HeartbeatResult {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<Partitions>,
}

impl HeartbeatResult {
    pub fn error(error: ErrorCode, message: impl Into<Option<String>>) -> HeartbeatResult {
        HeartbeatResult {
            error,
            error_message: message.into(),
            member_id: String::new(),
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: Duration,
    pub subscribed: Vec<String>,
    /// The subscription's regular expression, as given and compiled.
    pub regex: Option<(String, regex::Regex)>,
    /// The principal and host (of its last heartbeat) its regex is
    /// resolved as.
    pub principal: Option<(String, String)>,
    pub assignor: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub assigned: Partitions,
    /// Partitions the member was asked to give up and has not yet.
    pub revoking: Partitions,
    session_deadline: Instant,
    revoke_deadline: Option<Instant>,
    /// A static member that left temporarily (epoch -2): kept for its
    /// session so a restart takes its place.
    away: bool,
}

pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// Target assignment of the assignment epoch.
    pub target: HashMap<String, Partitions>,
    statics: HashMap<String, String>,
    pub state_since_ms: i64,
    /// The assignor the target was computed with.
    pub assignor: String,
    /// The subscribed topics' metadata the target was computed from
    /// (`None`: not computed since loaded).
    assigned_with: Option<BTreeMap<String, (Uuid, i32)>>,
    cfg: GroupsConfig,
}

impl ConsumerGroup {
    pub fn new(group_id: String, cfg: GroupsConfig) -> ConsumerGroup {
        ConsumerGroup {
            group_id,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: HashMap::new(),
            statics: HashMap::new(),
            state_since_ms: crate::wall::now_ms(),
            assignor: ASSIGNORS[0].to_owned(),
            assigned_with: None,
            cfg,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's consumer group states.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.epoch != self.assignment_epoch
                || !m.revoking.is_empty()
                || self.target.get(&m.member_id) != Some(&m.assigned)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Topics any member names in its subscription.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }

    /// Whether a member subscribes by regular expression (the coordinator
    /// then keeps every topic in its view).
    pub fn has_regex(&self) -> bool {
        self.members.values().any(|m| m.regex.is_some())
    }

    /// The topics a member consumes: those it names and those of `topics`
    /// its regular expression matches (and it may describe).
    fn member_topics(&self, m: &Member, topics: &TopicsView) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = m.subscribed.iter().cloned().collect();
        if let Some((_, re)) = &m.regex {
            let may_match = self.cfg.topic_access.matcher(m.principal.as_ref());
            out.extend(
                topics
                    .keys()
                    .filter(|t| re.is_match(t) && may_match(t))
                    .cloned(),
            );
        }
        out
    }

    /// Every topic some member consumes (names and regex matches).
    pub fn consumed_topics(&self, topics: &TopicsView) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| self.member_topics(m, topics))
            .collect()
    }

    fn bump(&mut self) {
        self.group_epoch += 1;
        self.state_since_ms = crate::wall::now_ms();
    }

    /// Whether a partition is owned (assigned or being revoked) by a member
    /// other than `except`.
    fn owned_by_other(&self, except: &str, topic: &Uuid, p: i32) -> bool {
        self.members.values().any(|m| {
            m.member_id != except
                && (m.assigned.get(topic).is_some_and(|s| s.contains(&p))
                    || m.revoking.get(topic).is_some_and(|s| s.contains(&p)))
        })
    }

    /// Validates an offset commit (OffsetCommit v9+ carries the member epoch).
    pub fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), ErrorCode> {
        if epoch < 0 && member_id.is_empty() && self.members.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(member_id) else {
            return Err(ErrorCode::UnknownMemberId);
        };
        if epoch != m.epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }

    pub fn next_wake(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline), m.revoke_deadline])
            .flatten()
            .min()
    }

    /// Removes members whose session or revocation time ran out. Returns
    /// how many were removed.
    pub fn on_timer(&mut self, now: Instant, topics: &TopicsView) -> u64 {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline <= now || m.revoke_deadline.is_some_and(|d| d <= now))
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %self.group_id, member = %id, "consumer group member timed out; removing it");
            self.remove_member(id);
        }
        if !gone.is_empty() {
            self.maybe_assign(topics);
        }
        gone.len() as u64
    }

    // ---- storage -------------------------------------------------------------

    pub fn snapshot(&self) -> StoredGroup {
        Stored {
            group_type: GroupType::Consumer,
            group_id: self.group_id.clone(),
            protocol_type: Some("consumer".into()),
            protocol_name: Some(self.assignor.clone()),
            generation: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            leader_id: None,
            state_since_ms: self.state_since_ms,
            data: Vec::new(),
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout: self.cfg.consumer_session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    subscription: encode_subscription(m),
                    assignment: encode_assignment(
                        m,
                        self.target.get(&m.member_id).unwrap_or(&Partitions::new()),
                    ),
                })
                .collect(),
        }
        .into()
    }

    pub fn load(stored: StoredGroup, cfg: GroupsConfig, now: Instant) -> ConsumerGroup {
        let stored = Stored::from(stored);
        let mut g = ConsumerGroup::new(stored.group_id, cfg);
        g.group_epoch = stored.generation;
        g.assignment_epoch = stored.assignment_epoch;
        g.state_since_ms = stored.state_since_ms;
        if let Some(a) = stored.protocol_name {
            g.assignor = a;
        }
        for s in stored.members {
            let sub = decode_subscription(&s.subscription);
            let regex = compile_regex(&sub.regex).ok().flatten();
            let Some((epoch, previous_epoch, assigned, revoking, target)) =
                decode_assignment(&s.assignment)
            else {
                tracing::warn!(group = %g.group_id, member = %s.member_id, "unreadable stored member; it rejoins");
                continue;
            };
            if let Some(i) = &s.instance_id {
                g.statics.insert(i.clone(), s.member_id.clone());
            }
            g.target.insert(s.member_id.clone(), target);
            let rebalance_timeout = s.rebalance_timeout;
            g.members.insert(
                s.member_id.clone(),
                Member {
                    member_id: s.member_id,
                    instance_id: s.instance_id,
                    rack_id: sub.rack,
                    client_id: s.client_id,
                    client_host: s.client_host,
                    rebalance_timeout,
                    subscribed: sub.topics,
                    regex,
                    principal: sub.principal,
                    assignor: sub.assignor,
                    epoch,
                    previous_epoch,
                    revoke_deadline: (!revoking.is_empty()).then_some(now + rebalance_timeout),
                    assigned,
                    revoking,
                    session_deadline: now + g.cfg.consumer_session_timeout,
                    away: false,
                },
            );
        }
        g
    }
}

fn invalid(message: &str) -> HeartbeatResult {
    HeartbeatResult::error(ErrorCode::InvalidRequest, message.to_owned())
}

/// The answer as the wire wants it: partitions by topic id.
pub fn to_wire(p: &Partitions) -> Vec<(Uuid, Vec<i32>)> {
    p.iter()
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

/// Owned partitions from the wire.
pub fn from_wire(list: impl IntoIterator<Item = (Uuid, Vec<i32>)>) -> Partitions {
    let mut out = Partitions::new();
    for (t, ps) in list {
        out.entry(t).or_default().extend(ps);
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}
