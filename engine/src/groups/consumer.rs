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
use std::time::{Duration, Instant, SystemTime};

use rutomq_meta::groups::StoredGroup;
use uuid::Uuid;

use super::stored::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, GroupType,
    Member as StoredMember, Stored,
};
use super::GroupsConfig;
use crate::error::ErrorCode;

/// Partitions by topic id.
pub type Partitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// Subscribed topics as the coordinator knows them: name → (id, partitions).
pub type TopicsView = HashMap<String, (Uuid, i32)>;

/// Longest regular expression accepted in a subscription.
pub const SUBSCRIPTION_REGEX_BYTES_MAX: usize = 4096;
/// Memory one compiled subscription regex may take.
pub const SUBSCRIPTION_REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

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
    /// v0 lets the coordinator pick the member id on join.
    pub version: i16,
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn count(p: &Partitions) -> usize {
    p.values().map(BTreeSet::len).sum()
}

fn minus(a: &Partitions, b: &Partitions) -> Partitions {
    let mut out = Partitions::new();
    for (t, ps) in a {
        let rest: BTreeSet<i32> = match b.get(t) {
            Some(bs) => ps.difference(bs).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(*t, rest);
        }
    }
    out
}

fn intersects(a: &Partitions, b: &Partitions) -> bool {
    a.iter()
        .any(|(t, ps)| b.get(t).is_some_and(|bs| !ps.is_disjoint(bs)))
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
            state_since_ms: now_ms(),
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
    /// its regular expression matches.
    fn member_topics(m: &Member, topics: &TopicsView) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = m.subscribed.iter().cloned().collect();
        if let Some((_, re)) = &m.regex {
            out.extend(topics.keys().filter(|t| re.is_match(t)).cloned());
        }
        out
    }

    /// Every topic some member consumes (names and regex matches).
    pub fn consumed_topics(&self, topics: &TopicsView) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| Self::member_topics(m, topics))
            .collect()
    }

    fn bump(&mut self) {
        self.group_epoch += 1;
        self.state_since_ms = now_ms();
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

    /// Handles one heartbeat. `changed` is set when the group's durable
    /// state changed (the answer must wait for it to be stored).
    pub fn heartbeat(
        &mut self,
        a: HeartbeatArgs,
        topics: &TopicsView,
        now: Instant,
        changed: &mut bool,
    ) -> HeartbeatResult {
        if let Some(assignor) = &a.server_assignor {
            if !ASSIGNORS.contains(&assignor.as_str()) {
                return HeartbeatResult::error(
                    ErrorCode::UnsupportedAssignor,
                    format!("assignor {assignor} is not supported; use one of {ASSIGNORS:?}"),
                );
            }
        }
        let regex = match a.subscribed_topic_regex.as_deref().map(compile_regex) {
            None => None,
            Some(Ok(r)) => Some(r),
            Some(Err(message)) => {
                return HeartbeatResult::error(ErrorCode::InvalidRegularExpression, message);
            }
        };
        let member_id = match a.member_epoch {
            0 => {
                if a.rebalance_timeout_ms <= 0 {
                    return invalid("RebalanceTimeoutMs must be provided when joining");
                }
                if a.subscribed_topic_names.is_none() && a.subscribed_topic_regex.is_none() {
                    return invalid(
                        "SubscribedTopicNames or SubscribedTopicRegex must be set when joining",
                    );
                }
                let topics_wanted = a.subscribed_topic_names.clone().unwrap_or_default();
                if a.owned.as_ref().is_some_and(|o| count(o) != 0) {
                    return invalid("TopicPartitions must be empty when joining");
                }
                let member_id = if a.member_id.is_empty() {
                    if a.version >= 1 {
                        return invalid("MemberId can't be empty");
                    }
                    Uuid::new_v4().to_string()
                } else {
                    a.member_id.clone()
                };
                if let Err(e) = self.join(&member_id, &a, topics_wanted, now, changed) {
                    return e;
                }
                if let Some(m) = self.members.get_mut(&member_id) {
                    m.regex = regex.flatten();
                    if let Some((pattern, _)) = &m.regex {
                        tracing::debug!(group = %self.group_id, member = %member_id, %pattern, "member subscribes by regular expression");
                    }
                }
                member_id
            }
            -1 => {
                let Some(m) = self.members.get(&a.member_id) else {
                    return HeartbeatResult::error(ErrorCode::UnknownMemberId, None);
                };
                let id = m.member_id.clone();
                self.remove_member(&id);
                *changed = true;
                return HeartbeatResult {
                    error: ErrorCode::None,
                    error_message: None,
                    member_id: id,
                    member_epoch: -1,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                };
            }
            -2 => {
                let session = self.cfg.consumer_session_timeout;
                let Some(m) = self.members.get_mut(&a.member_id) else {
                    return HeartbeatResult::error(ErrorCode::UnknownMemberId, None);
                };
                if m.instance_id.is_none() {
                    return invalid("only a static member leaves with epoch -2");
                }
                m.away = true;
                m.session_deadline = now + session;
                return HeartbeatResult {
                    error: ErrorCode::None,
                    error_message: None,
                    member_id: a.member_id.clone(),
                    member_epoch: -2,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                };
            }
            epoch => {
                let Some(m) = self.members.get_mut(&a.member_id) else {
                    return HeartbeatResult::error(ErrorCode::UnknownMemberId, None);
                };
                if epoch != m.epoch {
                    // The answer that moved the member on may have been lost:
                    // the previous epoch is fine while it owns nothing new.
                    let lost_answer = epoch == m.previous_epoch
                        && a.owned
                            .as_ref()
                            .is_some_and(|o| minus(o, &m.assigned).is_empty());
                    if !lost_answer {
                        return HeartbeatResult::error(
                            ErrorCode::FencedMemberEpoch,
                            format!("member epoch {epoch} is not the current {}", m.epoch),
                        );
                    }
                }
                if a.rebalance_timeout_ms > 0 {
                    m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
                }
                let mut bump = false;
                if let Some(mut t) = a.subscribed_topic_names.clone() {
                    t.sort();
                    t.dedup();
                    if t != m.subscribed {
                        m.subscribed = t;
                        bump = true;
                    }
                }
                if let Some(r) = regex.clone() {
                    if r.as_ref().map(|x| &x.0) != m.regex.as_ref().map(|x| &x.0) {
                        m.regex = r;
                        bump = true;
                    }
                }
                if a.server_assignor.is_some() && a.server_assignor != m.assignor {
                    m.assignor = a.server_assignor.clone();
                    bump = true;
                }
                if bump {
                    self.bump();
                    *changed = true;
                }
                a.member_id.clone()
            }
        };
        let session = self.cfg.consumer_session_timeout;
        if let Some(m) = self.members.get_mut(&member_id) {
            m.session_deadline = now + session;
            m.away = false;
        }
        // Topic changes come through `maybe_assign` from the coordinator's
        // refresh; a heartbeat recomputes only what its own change moved.
        if self.group_epoch > self.assignment_epoch {
            self.maybe_assign(topics);
        }
        self.reconcile(&member_id, a.owned.as_ref(), now, changed);
        let m = &self.members[&member_id];
        HeartbeatResult {
            error: ErrorCode::None,
            error_message: None,
            member_id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: self.cfg.consumer_heartbeat_interval.as_millis() as i32,
            assignment: Some(m.assigned.clone()),
        }
    }

    fn join(
        &mut self,
        member_id: &str,
        a: &HeartbeatArgs,
        mut subscribed: Vec<String>,
        now: Instant,
        changed: &mut bool,
    ) -> Result<(), HeartbeatResult> {
        subscribed.sort();
        subscribed.dedup();
        let fresh = |epoch: i32| Member {
            member_id: member_id.to_owned(),
            instance_id: a.instance_id.clone(),
            rack_id: a.rack_id.clone(),
            client_id: a.client_id.clone(),
            client_host: a.client_host.clone(),
            rebalance_timeout: Duration::from_millis(a.rebalance_timeout_ms as u64),
            subscribed: subscribed.clone(),
            regex: None,
            assignor: a.server_assignor.clone(),
            epoch,
            previous_epoch: -1,
            assigned: Partitions::new(),
            revoking: Partitions::new(),
            session_deadline: now + self.cfg.consumer_session_timeout,
            revoke_deadline: None,
            away: false,
        };
        if let Some(instance) = &a.instance_id {
            let known = self
                .statics
                .get(instance)
                .filter(|id| self.members.contains_key(*id))
                .cloned();
            if known.is_none() {
                // A mapping left by a member that is gone.
                self.statics.remove(instance);
            }
            if let Some(old_id) = known {
                if old_id != member_id && self.members.contains_key(member_id) {
                    return Err(HeartbeatResult::error(
                        ErrorCode::InvalidRequest,
                        format!("member id {member_id} belongs to another member"),
                    ));
                }
                let old = &self.members[&old_id];
                if old_id != member_id && !old.away {
                    return Err(HeartbeatResult::error(
                        ErrorCode::UnreleasedInstanceId,
                        format!("instance id {instance} is in use by another member"),
                    ));
                }
                // A restart: the new member takes the old one's place, epoch
                // and partitions (KIP-848 static membership).
                let Some(mut m) = self.members.remove(&old_id) else {
                    return Err(HeartbeatResult::error(ErrorCode::UnknownMemberId, None));
                };
                let same = m.subscribed == subscribed;
                m.member_id = member_id.to_owned();
                m.client_id = a.client_id.clone();
                m.client_host = a.client_host.clone();
                m.rack_id = a.rack_id.clone();
                m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
                m.subscribed = subscribed;
                m.assignor = a.server_assignor.clone();
                m.away = false;
                if let Some(t) = self.target.remove(&old_id) {
                    self.target.insert(member_id.to_owned(), t);
                }
                self.members.insert(member_id.to_owned(), m);
                self.statics.insert(instance.clone(), member_id.to_owned());
                if !same {
                    self.bump();
                }
                *changed = true;
                return Ok(());
            }
        }
        match self.members.get_mut(member_id) {
            Some(m) => {
                // A member rejoining (after being fenced): it holds nothing.
                m.assigned.clear();
                m.revoking.clear();
                m.epoch = 0;
                m.previous_epoch = -1;
                m.subscribed = subscribed;
                m.assignor = a.server_assignor.clone();
                m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
            }
            None => {
                if self.members.len() >= self.cfg.group_size_max {
                    return Err(HeartbeatResult::error(
                        ErrorCode::GroupMaxSizeReached,
                        format!("the group has {} members", self.members.len()),
                    ));
                }
                if let Some(i) = &a.instance_id {
                    self.statics.insert(i.clone(), member_id.to_owned());
                }
                self.members.insert(member_id.to_owned(), fresh(0));
            }
        }
        self.bump();
        *changed = true;
        Ok(())
    }

    fn remove_member(&mut self, member_id: &str) {
        if let Some(m) = self.members.remove(member_id) {
            if let Some(i) = &m.instance_id {
                if self.statics.get(i).map(String::as_str) == Some(member_id) {
                    self.statics.remove(i);
                }
            }
            self.target.remove(member_id);
            self.bump();
        }
    }

    /// The assignor the members prefer (most votes; the default when none
    /// names one).
    fn pick_assignor(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|&(name, n)| (n, std::cmp::Reverse(name)))
            .map_or_else(|| ASSIGNORS[0].to_owned(), |(n, _)| n.to_owned())
    }

    /// Recomputes the target assignment when the group epoch moved, or the
    /// subscribed topics' partitions changed.
    pub fn maybe_assign(&mut self, topics: &TopicsView) {
        let seen: BTreeMap<String, (Uuid, i32)> = self
            .consumed_topics(topics)
            .into_iter()
            .filter_map(|t| topics.get(&t).map(|v| (t, *v)))
            .collect();
        let topics_moved = self.assigned_with.as_ref() != Some(&seen);
        if self.group_epoch == self.assignment_epoch && !topics_moved {
            return;
        }
        if self.group_epoch == self.assignment_epoch
            && self.assigned_with.is_none()
            && self.compute_target(topics) == self.target
        {
            // Just loaded (a takeover), and the stored target still holds:
            // no new epoch for the members.
            self.assigned_with = Some(seen);
            return;
        }
        if self.group_epoch == self.assignment_epoch {
            // Partitions appeared or vanished: that is a new epoch too.
            self.bump();
        }
        self.assignor = self.pick_assignor();
        self.target = self.compute_target(topics);
        self.assignment_epoch = self.group_epoch;
        self.assigned_with = Some(seen);
    }

    fn compute_target(&self, topics: &TopicsView) -> HashMap<String, Partitions> {
        let assignor = self.pick_assignor();
        let subs: Vec<(&str, Vec<(Uuid, i32)>)> = self
            .members
            .values()
            .map(|m| {
                (
                    m.member_id.as_str(),
                    Self::member_topics(m, topics)
                        .iter()
                        .filter_map(|t| topics.get(t).copied())
                        .collect(),
                )
            })
            .collect();
        if assignor == "range" {
            range_assign(&subs)
        } else {
            uniform_assign(&subs, &self.target)
        }
    }

    /// Moves a member towards its target: first it revokes what the target
    /// no longer holds; then it takes the assignment epoch and every target
    /// partition no other member still owns.
    fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&Partitions>,
        now: Instant,
        changed: &mut bool,
    ) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if !m.revoking.is_empty() {
            match owned {
                Some(o) if !intersects(o, &m.revoking) => {
                    m.revoking.clear();
                    m.revoke_deadline = None;
                    *changed = true;
                }
                _ => return, // still revoking
            }
        }
        if m.epoch != epoch {
            let give_up = minus(&m.assigned, &target);
            if !give_up.is_empty() {
                m.assigned = minus(&m.assigned, &give_up);
                m.revoking = give_up;
                m.revoke_deadline = Some(now + m.rebalance_timeout);
                *changed = true;
                return;
            }
            m.previous_epoch = m.epoch;
            m.epoch = epoch;
            *changed = true;
        }
        let missing = minus(&target, &self.members[member_id].assigned);
        let mut gained = Vec::new();
        for (t, ps) in &missing {
            for &p in ps {
                if !self.owned_by_other(member_id, t, p) {
                    gained.push((*t, p));
                }
            }
        }
        if !gained.is_empty() {
            let m = self.members.get_mut(member_id).expect("present");
            for (t, p) in gained {
                m.assigned.entry(t).or_default().insert(p);
            }
            *changed = true;
        }
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
            let (subscribed, assignor, rack_id, pattern) = decode_subscription(&s.subscription);
            let regex = compile_regex(&pattern).ok().flatten();
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
                    rack_id,
                    client_id: s.client_id,
                    client_host: s.client_host,
                    rebalance_timeout,
                    subscribed,
                    regex,
                    assignor,
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

/// KIP-848 range: per topic, the members subscribed to it in member id
/// order each take a contiguous run, the first ones one more.
fn range_assign(subs: &[(&str, Vec<(Uuid, i32)>)]) -> HashMap<String, Partitions> {
    let mut out: HashMap<String, Partitions> = subs
        .iter()
        .map(|(m, _)| (m.to_string(), Partitions::new()))
        .collect();
    let mut topics: BTreeMap<Uuid, (i32, Vec<&str>)> = BTreeMap::new();
    for (m, ts) in subs {
        for &(t, n) in ts {
            topics.entry(t).or_insert((n, Vec::new())).1.push(m);
        }
    }
    for (t, (n, mut members)) in topics {
        members.sort_unstable();
        let k = members.len() as i32;
        let (each, extra) = (n / k, n % k);
        let mut next = 0;
        for (i, m) in members.iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            let ps: BTreeSet<i32> = (next..next + take).collect();
            next += take;
            if !ps.is_empty() {
                out.get_mut(*m).expect("member").insert(t, ps);
            }
        }
    }
    out
}

/// KIP-848 uniform: balanced over all members, sticky: a member keeps what
/// it had as long as it stays within its share; the rest go to the least
/// loaded subscribed member.
fn uniform_assign(
    subs: &[(&str, Vec<(Uuid, i32)>)],
    previous: &HashMap<String, Partitions>,
) -> HashMap<String, Partitions> {
    let subscribed: HashMap<&str, HashMap<Uuid, i32>> = subs
        .iter()
        .map(|(m, ts)| (*m, ts.iter().copied().collect()))
        .collect();
    let mut all: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for (_, ts) in subs {
        for &(t, n) in ts {
            all.extend((0..n).map(|p| (t, p)));
        }
    }
    // Shares count only members that can take something.
    let members = subs.iter().filter(|(_, ts)| !ts.is_empty()).count().max(1);
    let quota_max = all.len().div_ceil(members);
    let mut out: HashMap<String, Partitions> = subs
        .iter()
        .map(|(m, _)| (m.to_string(), Partitions::new()))
        .collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // Sticky part.
    let mut names: Vec<&str> = subs.iter().map(|(m, _)| *m).collect();
    names.sort_unstable();
    for m in &names {
        let Some(prev) = previous.get(*m) else {
            continue;
        };
        let mine = out.get_mut(*m).expect("member");
        let mut n = 0;
        for (t, ps) in prev {
            let Some(&count) = subscribed[m].get(t) else {
                continue;
            };
            for &p in ps {
                if p < count && n < quota_max && taken.insert((*t, p)) {
                    mine.entry(*t).or_default().insert(p);
                    n += 1;
                }
            }
        }
    }
    // The rest, each to the least loaded member subscribed to its topic.
    let load = |o: &HashMap<String, Partitions>, m: &str| count(&o[m]);
    for (t, p) in all {
        if taken.contains(&(t, p)) {
            continue;
        }
        let best = names
            .iter()
            .filter(|m| subscribed[**m].contains_key(&t))
            .min_by_key(|m| (load(&out, m), **m));
        if let Some(m) = best {
            out.get_mut(*m)
                .expect("member")
                .entry(t)
                .or_default()
                .insert(p);
        }
    }
    // Even out: move from the fullest to the emptiest while it helps.
    loop {
        let most = names
            .iter()
            .max_by_key(|m| (load(&out, m), std::cmp::Reverse(**m)));
        let least = names.iter().min_by_key(|m| (load(&out, m), **m));
        let (Some(&hi), Some(&lo)) = (most, least) else {
            break;
        };
        if load(&out, hi) <= load(&out, lo) + 1 {
            break;
        }
        let movable = out[hi]
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .find(|(t, _)| subscribed[lo].contains_key(t));
        let Some((t, p)) = movable else {
            break; // lo cannot take any of hi's topics
        };
        out.get_mut(hi)
            .expect("member")
            .get_mut(&t)
            .expect("topic")
            .remove(&p);
        out.get_mut(hi)
            .expect("member")
            .retain(|_, ps| !ps.is_empty());
        out.get_mut(lo)
            .expect("member")
            .entry(t)
            .or_default()
            .insert(p);
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(member: &str, epoch: i32, owned: Option<Partitions>) -> HeartbeatArgs {
        HeartbeatArgs {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: (epoch == 0).then(|| vec!["t".to_owned()]),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned: if epoch == 0 {
                Some(Partitions::new())
            } else {
                owned
            },
            client_id: "c".into(),
            client_host: "/h".into(),
            version: 1,
        }
    }

    #[test]
    fn two_members_never_own_a_partition_at_once() {
        let t = Uuid::new_v4();
        let topics: TopicsView = [("t".to_owned(), (t, 6))].into_iter().collect();
        let mut g = ConsumerGroup::new("g".into(), GroupsConfig::default());
        let now = Instant::now();
        let mut ch = false;
        let a = g.heartbeat(args("a", 0, None), &topics, now, &mut ch);
        assert_eq!(a.error, ErrorCode::None);
        assert_eq!(count(a.assignment.as_ref().unwrap()), 6);
        let b = g.heartbeat(args("b", 0, None), &topics, now, &mut ch);
        assert_eq!(b.member_epoch, g.assignment_epoch);
        assert_eq!(
            count(b.assignment.as_ref().unwrap()),
            0,
            "a still owns them all"
        );
        // a is told to give three up.
        let a2 = g.heartbeat(
            args("a", a.member_epoch, a.assignment.clone()),
            &topics,
            now,
            &mut ch,
        );
        assert_eq!(count(a2.assignment.as_ref().unwrap()), 3);
        assert_eq!(
            a2.member_epoch, a.member_epoch,
            "epoch moves after revoking"
        );
        // Until a acknowledges, b still gets nothing.
        let b2 = g.heartbeat(
            args("b", b.member_epoch, Some(Partitions::new())),
            &topics,
            now,
            &mut ch,
        );
        assert_eq!(count(b2.assignment.as_ref().unwrap()), 0);
        // a acknowledges; b then takes the three.
        let a3 = g.heartbeat(
            args("a", a2.member_epoch, a2.assignment.clone()),
            &topics,
            now,
            &mut ch,
        );
        assert_eq!(a3.member_epoch, g.assignment_epoch);
        let b3 = g.heartbeat(
            args("b", b2.member_epoch, Some(Partitions::new())),
            &topics,
            now,
            &mut ch,
        );
        assert_eq!(count(b3.assignment.as_ref().unwrap()), 3);
        assert!(!intersects(
            a3.assignment.as_ref().unwrap(),
            b3.assignment.as_ref().unwrap()
        ));
        assert_eq!(g.state(), "Stable");
        // A stale epoch is fenced.
        let f = g.heartbeat(args("b", 1, Some(Partitions::new())), &topics, now, &mut ch);
        assert_eq!(f.error, ErrorCode::FencedMemberEpoch);
        // Commits carry the member epoch.
        assert_eq!(g.validate_commit("a", a3.member_epoch), Ok(()));
        assert_eq!(g.validate_commit("a", 1), Err(ErrorCode::StaleMemberEpoch));
        assert_eq!(g.validate_commit("z", 1), Err(ErrorCode::UnknownMemberId));
        // Round trip through storage.
        let back = ConsumerGroup::load(g.snapshot(), GroupsConfig::default(), now);
        assert_eq!(back.members["a"].assigned, g.members["a"].assigned);
        assert_eq!(back.members["b"].epoch, g.members["b"].epoch);
        assert_eq!(back.target, g.target);
        // b's session ends: a gets everything back.
        let later = now + GroupsConfig::default().consumer_session_timeout;
        g.heartbeat(
            args("a", a3.member_epoch, a3.assignment.clone()),
            &topics,
            later,
            &mut ch,
        );
        assert_eq!(g.on_timer(later + Duration::from_millis(1), &topics), 1);
        let a4 = g.heartbeat(
            args("a", a3.member_epoch, a3.assignment.clone()),
            &topics,
            later,
            &mut ch,
        );
        assert_eq!(count(a4.assignment.as_ref().unwrap()), 6);
    }

    #[test]
    fn regex_subscriptions_follow_topics() {
        let (t1, t2, x) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let mut topics: TopicsView = [
            ("orders-1".to_owned(), (t1, 2)),
            ("other".to_owned(), (x, 2)),
        ]
        .into_iter()
        .collect();
        let mut g = ConsumerGroup::new("g".into(), GroupsConfig::default());
        let now = Instant::now();
        let mut ch = false;
        let mut a = args("a", 0, None);
        a.subscribed_topic_names = None;
        a.subscribed_topic_regex = Some("orders-.*".into());
        let r = g.heartbeat(a, &topics, now, &mut ch);
        assert_eq!(r.error, ErrorCode::None);
        assert_eq!(
            r.assignment
                .clone()
                .unwrap()
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![t1]
        );
        // A new matching topic joins the assignment with a new epoch.
        topics.insert("orders-2".into(), (t2, 1));
        g.maybe_assign(&topics);
        let r2 = g.heartbeat(
            args("a", r.member_epoch, r.assignment.clone()),
            &topics,
            now,
            &mut ch,
        );
        assert!(r2.member_epoch > r.member_epoch);
        assert_eq!(count(r2.assignment.as_ref().unwrap()), 3);
        // Regexes are whole-name matches, and bad ones are refused.
        assert!(!compile_regex("orders")
            .unwrap()
            .unwrap()
            .1
            .is_match("orders-1"));
        let mut bad = args("b", 0, None);
        bad.subscribed_topic_regex = Some("(".into());
        assert_eq!(
            g.heartbeat(bad, &topics, now, &mut ch).error,
            ErrorCode::InvalidRegularExpression
        );
        // Stored and loaded again, the regex stays.
        let back = ConsumerGroup::load(g.snapshot(), GroupsConfig::default(), now);
        assert_eq!(back.members["a"].regex.as_ref().unwrap().0, "orders-.*");
    }

    #[test]
    fn assignors_balance() {
        let t1 = Uuid::from_u128(1);
        let t2 = Uuid::from_u128(2);
        let subs = vec![
            ("m1", vec![(t1, 5), (t2, 2)]),
            ("m2", vec![(t1, 5), (t2, 2)]),
            ("m3", vec![(t1, 5)]),
        ];
        let r = range_assign(&subs);
        assert_eq!(r["m1"][&t1].len(), 2);
        assert_eq!(r["m3"][&t1].len(), 1);
        assert_eq!(r["m1"][&t2].len() + r["m2"][&t2].len(), 2);
        let u = uniform_assign(&subs, &HashMap::new());
        let sizes: Vec<usize> = ["m1", "m2", "m3"].iter().map(|m| count(&u[*m])).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 7);
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{sizes:?}"
        );
        // Sticky: recomputing keeps everything in place.
        assert_eq!(uniform_assign(&subs, &u), u);
        // Also with a member that can take nothing and unequal topics.
        let (a, b) = (Uuid::from_u128(3), Uuid::from_u128(4));
        let subs = vec![
            ("m0", vec![(a, 1), (b, 3)]),
            ("m1", vec![(a, 1)]),
            ("m2", vec![]),
            ("m3", vec![(a, 1), (b, 3)]),
        ];
        let u = uniform_assign(&subs, &HashMap::new());
        assert_eq!(
            ["m0", "m1", "m2", "m3"]
                .iter()
                .map(|m| count(&u[*m]))
                .sum::<usize>(),
            4
        );
        assert_eq!(uniform_assign(&subs, &u), u, "re-running moves nothing");
    }
}
