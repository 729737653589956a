//! One classic consumer group (JoinGroup/SyncGroup protocol): its members,
//! generations and state machine, as Kafka's group coordinator runs it.
//!
//! Pure in-memory logic: calls come in with the time, answers go out on the
//! members' oneshots, and what must be made durable is pushed to
//! [`Effects::stores`] for the coordinator to write (in order) to
//! PostgreSQL. The coordinator calls [`ClassicGroup::on_timer`] at
//! [`ClassicGroup::next_wake`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use rutomq_meta::groups::StoredGroup;

use super::stored::{GroupType, Member as StoredMember, Stored};
use super::{GroupsConfig, JoinResult, JoinedMember, MemberDescription, SyncResult};
use crate::error::ErrorCode;

mod join;
mod sync;
#[cfg(test)]
mod tests;

/// The states of a classic group, named as Kafka names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// Supported protocols in preference order, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    join: Option<oneshot::Sender<JoinResult>>,
    sync: Option<oneshot::Sender<SyncResult>>,
    session_deadline: Instant,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// A member waiting for its JoinGroup or SyncGroup answer is alive
    /// whatever its heartbeats (Kafka's `shouldKeepAlive`).
    fn kept_alive(&self) -> bool {
        self.join.is_some() || self.sync.is_some()
    }
}

/// What a group asks its coordinator to write after a call.
pub enum AfterStore {
    /// Nothing waits on the write.
    Nothing,
    /// The leader's assignments of `generation`: once stored, the group is
    /// Stable and the members waiting in SyncGroup get them.
    Assignments {
        generation: i32,
        assignments: HashMap<String, Bytes>,
    },
    /// A static member rejoined in place of its old member id without a
    /// rebalance: it gets `result` once the replacement is stored.
    StaticRejoin {
        reply: oneshot::Sender<JoinResult>,
        result: JoinResult,
    },
    /// A KIP-848 heartbeat that changed the group: answered once stored.
    ConsumerHeartbeat {
        reply: oneshot::Sender<super::consumer::HeartbeatResult>,
        result: super::consumer::HeartbeatResult,
    },
    /// A share group made by an offset API: answered once stored.
    Stored(oneshot::Sender<ErrorCode>),
    /// A share group heartbeat that changed the group: answered once stored.
    ShareHeartbeat {
        reply: oneshot::Sender<super::share::ShareHeartbeatResult>,
        result: super::share::ShareHeartbeatResult,
    },
    /// A streams group heartbeat that changed the group: answered once
    /// stored.
    StreamsHeartbeat {
        reply: oneshot::Sender<super::streams::StreamsHeartbeatResult>,
        result: super::streams::StreamsHeartbeatResult,
    },
}

/// Side effects of a call, for the coordinator.
#[derive(Default)]
pub struct Effects {
    pub stores: Vec<(StoredGroup, AfterStore)>,
    /// Rebalances started (for metrics).
    pub rebalances: u64,
    /// Members removed because their session expired.
    pub expired: u64,
}

pub struct ClassicGroup {
    pub group_id: String,
    pub state: State,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until they join.
    pending: HashMap<String, Instant>,
    /// group.instance.id → member id.
    statics: HashMap<String, String>,
    /// When the join phase ends at the latest.
    join_deadline: Option<Instant>,
    /// Initial rebalance delay still extendable: (step, left).
    initial_delay: Option<(Duration, Duration)>,
    new_member_added: bool,
    /// Members of the current generation that have not sent SyncGroup, and
    /// when they are removed for it.
    pending_sync: HashSet<String>,
    sync_deadline: Option<Instant>,
    /// When the group entered its state (ms since the Unix epoch).
    pub state_since_ms: i64,
    cfg: GroupsConfig,
}

impl ClassicGroup {
    pub fn new(group_id: String, cfg: GroupsConfig) -> ClassicGroup {
        ClassicGroup {
            group_id,
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            statics: HashMap::new(),
            join_deadline: None,
            initial_delay: None,
            new_member_added: false,
            pending_sync: HashSet::new(),
            sync_deadline: None,
            state_since_ms: crate::wall::now_ms(),
            cfg,
        }
    }

    /// A group as it was stored; every member's session starts now, so a
    /// member that died with the previous coordinator expires here.
    pub fn load(stored: StoredGroup, cfg: GroupsConfig, now: Instant) -> ClassicGroup {
        let stored = Stored::from(stored);
        let mut g = ClassicGroup::new(stored.group_id, cfg);
        g.generation = stored.generation;
        g.protocol_type = stored.protocol_type;
        g.protocol_name = stored.protocol_name.clone();
        g.leader = stored.leader_id;
        g.state_since_ms = stored.state_since_ms;
        let protocol = stored.protocol_name.unwrap_or_default();
        for m in stored.members {
            if let Some(i) = &m.instance_id {
                g.statics.insert(i.clone(), m.member_id.clone());
            }
            g.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: vec![(protocol.clone(), Bytes::from(m.subscription))],
                    assignment: Bytes::from(m.assignment),
                    join: None,
                    sync: None,
                    session_deadline: now + m.session_timeout,
                },
            );
        }
        g.state = if g.members.is_empty() {
            State::Empty
        } else {
            State::Stable
        };
        g
    }

    /// The group as stored now ("Empty" or "Stable"), with `assignments`
    /// where given (the members' current ones otherwise).
    pub fn snapshot(&self, assignments: Option<&HashMap<String, Bytes>>) -> StoredGroup {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        Stored {
            group_type: GroupType::Classic,
            group_id: self.group_id.clone(),
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            generation: self.generation,
            assignment_epoch: 0,
            leader_id: self.leader.clone(),
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
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    subscription: m.metadata(&protocol).to_vec(),
                    assignment: assignments
                        .and_then(|a| a.get(&m.member_id))
                        .unwrap_or(&m.assignment)
                        .to_vec(),
                })
                .collect(),
        }
        .into()
    }

    /// Stores the group as it is (after it became Empty, or a static
    /// member was replaced).
    pub fn store_now(&self, fx: &mut Effects) {
        fx.stores.push((self.snapshot(None), AfterStore::Nothing));
    }

    fn set_state(&mut self, state: State) {
        if self.state != state {
            self.state = state;
            self.state_since_ms = crate::wall::now_ms();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty()
    }

    /// Members and pending members, for `group.max.size`.
    fn size(&self) -> usize {
        self.members.len() + self.pending.len()
    }

    /// Nothing waits on this group and it holds no member: it may be
    /// dropped from memory (its stored form is complete).
    pub fn idle(&self) -> bool {
        self.is_empty() && matches!(self.state, State::Empty | State::Dead)
    }

    fn rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    /// Whether `protocol_type`/`protocols` of a joiner can join the group.
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// The protocol of the next generation: among those every member
    /// supports, the one most members prefer (Kafka's vote).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == *n))
            })
            .collect();
        let mut votes: Vec<(usize, &String)> = candidates.iter().map(|c| (0, *c)).collect();
        for m in self.members.values() {
            let choice = m
                .protocols
                .iter()
                .find_map(|(n, _)| votes.iter().position(|(_, c)| *c == n));
            if let Some(i) = choice {
                votes[i].0 += 1;
            }
        }
        // Most votes; ties go to the first member's preference.
        let mut best: Option<(usize, &String)> = None;
        for (v, c) in votes {
            if best.is_none_or(|(bv, _)| v > bv) {
                best = Some((v, c));
            }
        }
        best.map(|(_, c)| c.clone())
    }

    fn current_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    fn join_result(&self, member_id: &str, with_members: bool) -> JoinResult {
        JoinResult {
            error: ErrorCode::None,
            member_id: member_id.to_owned(),
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            members: if with_members {
                self.current_members()
            } else {
                Vec::new()
            },
        }
    }

    /// Checks that `member_id` (with `instance_id`) is a current member:
    /// FENCED_INSTANCE_ID when the instance id belongs to another member id.
    fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id {
            return match self.statics.get(instance) {
                None => Err(ErrorCode::UnknownMemberId),
                Some(id) if id != member_id => Err(ErrorCode::FencedInstanceId),
                Some(_) => Ok(()),
            };
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ErrorCode::UnknownMemberId)
        }
    }

    // ---- OffsetCommit, describe ---------------------------------------------

    /// Whether an offset commit by `member_id`/`generation` is accepted now.
    pub fn validate_commit(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        transactional: bool,
        now: Instant,
    ) -> Result<(), ErrorCode> {
        if self.state == State::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation < 0 && self.state == State::Empty {
            // A "simple" commit: the group only stores offsets.
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation != self.generation {
                return Err(ErrorCode::IllegalGeneration);
            }
        } else if self.state != State::Empty {
            return Err(ErrorCode::UnknownMemberId);
        }
        // Kafka lets a transactional commit of the current generation in
        // while the assignment is being synced (exactly_once_v2 commits
        // then); a plain one must rejoin first.
        if self.state == State::CompletingRebalance && !transactional {
            return Err(ErrorCode::RebalanceInProgress);
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.session_deadline = now + m.session_timeout;
        }
        Ok(())
    }

    pub fn describe(&self) -> (String, Vec<MemberDescription>) {
        let stable = self.state == State::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = self
            .members
            .values()
            .map(|m| MemberDescription {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        (if stable { protocol } else { String::new() }, members)
    }

    /// Topics the members subscribe to, when the group uses the consumer
    /// protocol and every subscription parses (Kafka's rule for
    /// OffsetDelete); `None` otherwise.
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.clone()?;
        let mut topics = HashSet::new();
        for m in self.members.values() {
            let mut buf = m.metadata(&protocol);
            if buf.len() < 2 {
                return None;
            }
            let version = i16::from_be_bytes([buf[0], buf[1]]);
            let _ = bytes::Buf::get_i16(&mut buf);
            let version = version.clamp(0, 3);
            let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                ConsumerProtocolSubscription::decode(&mut buf, version)
            }));
            match decoded {
                Ok(Ok(s)) => topics.extend(s.topics.into_iter().map(|t| t.to_string())),
                _ => return None,
            }
        }
        Some(topics)
    }

    /// Marks the group deleted; waiting calls get `error`.
    pub fn kill(&mut self, error: ErrorCode) {
        for m in self.members.values_mut() {
            if let Some(w) = m.join.take() {
                let _ = w.send(JoinResult::error(error, &m.member_id));
            }
            if let Some(w) = m.sync.take() {
                let _ = w.send(SyncResult::error(error));
            }
        }
        self.set_state(State::Dead);
    }

    // ---- time ----------------------------------------------------------------

    /// The earliest time something may expire.
    pub fn next_wake(&self) -> Option<Instant> {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.kept_alive())
            .map(|m| m.session_deadline);
        sessions
            .chain(self.pending.values().copied())
            .chain(self.join_deadline)
            .chain(self.sync_deadline.filter(|_| !self.pending_sync.is_empty()))
            .min()
    }

    pub fn on_timer(&mut self, now: Instant, fx: &mut Effects) {
        // Members handed an id that never joined with it.
        let before = self.pending.len();
        self.pending.retain(|_, deadline| *deadline > now);
        if self.pending.len() != before {
            self.try_complete_join(now, fx);
        }
        // Sessions.
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.kept_alive() && m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "member session expired; removing it");
            fx.expired += 1;
            self.remove_member_and_update(&id, now, fx);
        }
        // The leader never sent its assignment, or members never synced.
        if self.sync_deadline.is_some_and(|d| d <= now) {
            self.sync_deadline = None;
            if matches!(self.state, State::CompletingRebalance | State::Stable)
                && !self.pending_sync.is_empty()
            {
                let late: Vec<String> = self.pending_sync.drain().collect();
                tracing::info!(group = %self.group_id, members = ?late, "members did not sync in time; removing them");
                for id in &late {
                    self.remove_member(id);
                }
                if self.members.is_empty() {
                    self.complete_empty(fx);
                } else {
                    self.prepare_rebalance(now, fx);
                }
            }
        }
        // The join phase.
        if self.state == State::PreparingRebalance && self.join_deadline.is_some_and(|d| d <= now) {
            match self.initial_delay {
                Some((step, left)) if self.new_member_added && !left.is_zero() => {
                    let step = step.min(left);
                    self.initial_delay = Some((step, left - step));
                    self.new_member_added = false;
                    self.join_deadline = Some(now + step);
                }
                _ => {
                    self.initial_delay = None;
                    self.complete_join(now, fx);
                }
            }
        }
    }

    /// The last member left outside a join phase.
    fn complete_empty(&mut self, fx: &mut Effects) {
        self.generation += 1;
        self.protocol_name = None;
        self.leader = None;
        self.set_state(State::Empty);
        self.store_now(fx);
    }
}

impl JoinResult {
    pub fn error(error: ErrorCode, member_id: &str) -> JoinResult {
        JoinResult {
            error,
            member_id: member_id.to_owned(),
            generation: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            members: Vec::new(),
        }
    }
}

impl SyncResult {
    pub fn error(error: ErrorCode) -> SyncResult {
        SyncResult {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}
