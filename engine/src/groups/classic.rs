//! One classic consumer group (JoinGroup/SyncGroup protocol): its members,
//! generations and state machine, as Kafka's group coordinator runs it.
//!
//! Pure in-memory logic: calls come in with the time, answers go out on the
//! members' oneshots, and what must be made durable is pushed to
//! [`Effects::stores`] for the coordinator to write (in order) to
//! PostgreSQL. The coordinator calls [`ClassicGroup::on_timer`] at
//! [`ClassicGroup::next_wake`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::channel::oneshot;
use rutomq_meta::groups::StoredGroup;

use super::stored::{GroupType, Member as StoredMember, Stored};
use super::{
    GroupsConfig, JoinArgs, JoinResult, JoinedMember, LeaveMember, MemberDescription, SyncArgs,
    SyncResult,
};
use crate::error::ErrorCode;

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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
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
            state_since_ms: now_ms(),
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
            self.state_since_ms = now_ms();
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

    // ---- JoinGroup ---------------------------------------------------------

    pub fn join(
        &mut self,
        args: JoinArgs,
        reply: oneshot::Sender<JoinResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        if self.state == State::Dead {
            let _ = reply.send(JoinResult::error(
                ErrorCode::CoordinatorNotAvailable,
                &args.member_id,
            ));
            return;
        }
        if !self.supports(&args.protocol_type, &args.protocols) {
            let _ = reply.send(JoinResult::error(
                ErrorCode::InconsistentGroupProtocol,
                &args.member_id,
            ));
            return;
        }
        if args.member_id.is_empty() {
            self.join_unknown(args, reply, now, fx);
        } else {
            self.join_known(args, reply, now, fx);
        }
    }

    fn join_unknown(
        &mut self,
        args: JoinArgs,
        reply: oneshot::Sender<JoinResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let prefix = args.instance_id.as_deref().unwrap_or(&args.client_id);
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = args.instance_id.clone() {
            if let Some(old_id) = self.statics.get(&instance).cloned() {
                self.replace_static_member(old_id, new_id, args, reply, now, fx);
                return;
            }
        }
        if self.size() >= self.cfg.group_size_max {
            let _ = reply.send(JoinResult::error(ErrorCode::GroupMaxSizeReached, ""));
            return;
        }
        if args.instance_id.is_none() && args.require_known_member_id {
            // KIP-394: the member id is handed out first; the member joins
            // with it, so a retried join cannot leave a ghost member behind.
            self.pending
                .insert(new_id.clone(), now + args.session_timeout);
            let _ = reply.send(JoinResult::error(ErrorCode::MemberIdRequired, &new_id));
            return;
        }
        self.add_member_and_rebalance(new_id, args, reply, now, fx);
    }

    fn join_known(
        &mut self,
        args: JoinArgs,
        reply: oneshot::Sender<JoinResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let member_id = args.member_id.clone();
        if self.pending.contains_key(&member_id) {
            if self.size() > self.cfg.group_size_max {
                self.pending.remove(&member_id);
                let _ = reply.send(JoinResult::error(
                    ErrorCode::GroupMaxSizeReached,
                    &member_id,
                ));
                return;
            }
            self.pending.remove(&member_id);
            self.add_member_and_rebalance(member_id, args, reply, now, fx);
            return;
        }
        if let Err(e) = self.validate_member(&member_id, args.instance_id.as_deref()) {
            let _ = reply.send(JoinResult::error(e, &member_id));
            return;
        }
        match self.state {
            State::PreparingRebalance => self.update_member_and_rebalance(args, reply, now, fx),
            State::CompletingRebalance => {
                if self.members[&member_id].same_protocols(&args.protocols) {
                    // The join answer was lost: send it again.
                    let leader = self.leader.as_deref() == Some(member_id.as_str());
                    let _ = reply.send(self.join_result(&member_id, leader));
                } else {
                    self.update_member_and_rebalance(args, reply, now, fx);
                }
            }
            State::Stable => {
                let leader = self.leader.as_deref() == Some(member_id.as_str());
                if leader || !self.members[&member_id].same_protocols(&args.protocols) {
                    // The leader rejoining means new metadata to assign from.
                    self.update_member_and_rebalance(args, reply, now, fx);
                } else {
                    let member = self.members.get_mut(&member_id).expect("validated");
                    member.session_deadline = now + member.session_timeout;
                    let _ = reply.send(self.join_result(&member_id, false));
                }
            }
            State::Empty | State::Dead => {
                let _ = reply.send(JoinResult::error(ErrorCode::UnknownMemberId, &member_id));
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        args: JoinArgs,
        reply: oneshot::Sender<JoinResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        if self.members.is_empty() {
            self.protocol_type = Some(args.protocol_type.clone());
        }
        if let Some(i) = &args.instance_id {
            self.statics.insert(i.clone(), member_id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member_id.clone());
        }
        self.members.insert(
            member_id.clone(),
            Member {
                member_id,
                instance_id: args.instance_id,
                client_id: args.client_id,
                client_host: args.client_host,
                session_timeout: args.session_timeout,
                rebalance_timeout: args.rebalance_timeout,
                protocols: args.protocols,
                assignment: Bytes::new(),
                join: Some(reply),
                sync: None,
                session_deadline: now + args.session_timeout,
            },
        );
        self.new_member_added = true;
        self.maybe_prepare_rebalance(now, fx);
    }

    fn update_member_and_rebalance(
        &mut self,
        args: JoinArgs,
        reply: oneshot::Sender<JoinResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let member = self.members.get_mut(&args.member_id).expect("validated");
        member.protocols = args.protocols;
        member.session_timeout = args.session_timeout;
        member.rebalance_timeout = args.rebalance_timeout;
        member.session_deadline = now + args.session_timeout;
        if let Some(old) = member.join.replace(reply) {
            // A second join from the same member supersedes the first.
            let _ = old.send(JoinResult::error(
                ErrorCode::RebalanceInProgress,
                &args.member_id,
            ));
        }
        self.maybe_prepare_rebalance(now, fx);
    }

    /// A static member restarted (new member id, same instance id).
    fn replace_static_member(
        &mut self,
        old_id: String,
        new_id: String,
        args: JoinArgs,
        reply: oneshot::Sender<JoinResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let mut member = self.members.remove(&old_id).expect("static member exists");
        if let Some(w) = member.join.take() {
            let _ = w.send(JoinResult::error(ErrorCode::FencedInstanceId, &old_id));
        }
        if let Some(w) = member.sync.take() {
            let _ = w.send(SyncResult::error(ErrorCode::FencedInstanceId));
        }
        member.protocols = args.protocols;
        member.member_id = new_id.clone();
        member.client_id = args.client_id;
        member.client_host = args.client_host;
        member.session_timeout = args.session_timeout;
        member.rebalance_timeout = args.rebalance_timeout;
        member.session_deadline = now + args.session_timeout;
        self.members.insert(new_id.clone(), member);
        self.statics
            .insert(args.instance_id.clone().expect("static"), new_id.clone());
        if self.pending_sync.remove(&old_id) {
            self.pending_sync.insert(new_id.clone());
        }
        let was_leader = self.leader.as_deref() == Some(old_id.as_str());
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            State::Stable if self.select_protocol() == self.protocol_name => {
                // Same protocol: keep the assignment, no rebalance (KIP-345).
                let mut result = self.join_result(&new_id, was_leader);
                result.skip_assignment = was_leader;
                fx.stores.push((
                    self.snapshot(None),
                    AfterStore::StaticRejoin { reply, result },
                ));
            }
            _ => {
                let m = self.members.get_mut(&new_id).expect("inserted");
                m.join = Some(reply);
                self.maybe_prepare_rebalance(now, fx);
            }
        }
    }

    fn maybe_prepare_rebalance(&mut self, now: Instant, fx: &mut Effects) {
        match self.state {
            State::Stable | State::CompletingRebalance | State::Empty => {
                self.prepare_rebalance(now, fx)
            }
            State::PreparingRebalance => self.try_complete_join(now, fx),
            State::Dead => {}
        }
    }

    fn prepare_rebalance(&mut self, now: Instant, fx: &mut Effects) {
        if self.state == State::CompletingRebalance {
            self.reset_assignments(ErrorCode::RebalanceInProgress);
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        fx.rebalances += 1;
        let timeout = self.rebalance_timeout();
        if self.state == State::Empty {
            // group.initial.rebalance.delay.ms: let the first members gather.
            let step = self.cfg.initial_rebalance_delay.min(timeout);
            self.initial_delay = Some((step, timeout.saturating_sub(step)));
            self.new_member_added = false;
            self.join_deadline = Some(now + step);
        } else {
            self.initial_delay = None;
            self.join_deadline = Some(now + timeout);
        }
        self.set_state(State::PreparingRebalance);
        tracing::debug!(group = %self.group_id, generation = self.generation, "preparing rebalance");
        self.try_complete_join(now, fx);
    }

    /// Members waiting in SyncGroup get `error`; assignments are dropped.
    fn reset_assignments(&mut self, error: ErrorCode) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
            if let Some(w) = m.sync.take() {
                let _ = w.send(SyncResult::error(error));
            }
        }
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.join.is_some())
    }

    fn try_complete_join(&mut self, now: Instant, fx: &mut Effects) {
        if self.state == State::PreparingRebalance
            && self.initial_delay.is_none()
            && self.all_joined()
        {
            self.complete_join(now, fx);
        }
    }

    fn complete_join(&mut self, now: Instant, fx: &mut Effects) {
        // Dynamic members that did not rejoin are out; static ones keep
        // their place (they may be restarting).
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join.is_none() && m.instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id);
        }
        if !self.members.is_empty() && self.members.values().all(|m| m.join.is_none()) {
            // Only static members left and none rejoined: wait once more
            // (their sessions expire them if they are gone).
            self.join_deadline = Some(now + self.rebalance_timeout());
            return;
        }
        let leader_rejoined = self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.get(l).is_some_and(|m| m.join.is_some()));
        if !leader_rejoined {
            self.leader = self
                .members
                .values()
                .find(|m| m.join.is_some())
                .map(|m| m.member_id.clone());
        }
        self.join_deadline = None;
        self.initial_delay = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.leader = None;
            self.set_state(State::Empty);
            tracing::info!(group = %self.group_id, generation = self.generation, "group is empty");
            self.store_now(fx);
            return;
        }
        self.protocol_name = self.select_protocol();
        self.set_state(State::CompletingRebalance);
        self.pending_sync = self.members.keys().cloned().collect();
        self.sync_deadline = Some(now + self.rebalance_timeout());
        tracing::info!(
            group = %self.group_id,
            generation = self.generation,
            members = self.members.len(),
            "group rebalanced; waiting for the leader's assignment"
        );
        let leader = self.leader.clone().unwrap_or_default();
        let members = self.current_members();
        let base = self.join_result("", false);
        for m in self.members.values_mut() {
            m.session_deadline = now + m.session_timeout;
            if let Some(w) = m.join.take() {
                let mut r = base.clone();
                r.member_id = m.member_id.clone();
                if m.member_id == leader {
                    r.members = members.clone();
                }
                let _ = w.send(r);
            }
        }
    }

    /// Removes a member; its waiting calls get UNKNOWN_MEMBER_ID.
    fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let mut m = self.members.remove(member_id)?;
        if let Some(w) = m.join.take() {
            let _ = w.send(JoinResult::error(ErrorCode::UnknownMemberId, member_id));
        }
        if let Some(w) = m.sync.take() {
            let _ = w.send(SyncResult::error(ErrorCode::UnknownMemberId));
        }
        if let Some(i) = &m.instance_id {
            if self.statics.get(i).map(String::as_str) == Some(member_id) {
                self.statics.remove(i);
            }
        }
        self.pending_sync.remove(member_id);
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        Some(m)
    }

    fn remove_member_and_update(&mut self, member_id: &str, now: Instant, fx: &mut Effects) {
        if self.remove_member(member_id).is_none() {
            return;
        }
        match self.state {
            State::Stable | State::CompletingRebalance => self.prepare_rebalance(now, fx),
            State::PreparingRebalance => self.try_complete_join(now, fx),
            State::Empty | State::Dead => {}
        }
    }

    // ---- SyncGroup ---------------------------------------------------------

    pub fn sync(
        &mut self,
        args: SyncArgs,
        reply: oneshot::Sender<SyncResult>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let fail = |reply: oneshot::Sender<SyncResult>, e| {
            let _ = reply.send(SyncResult::error(e));
        };
        if self.state == State::Dead {
            return fail(reply, ErrorCode::CoordinatorNotAvailable);
        }
        if let Err(e) = self.validate_member(&args.member_id, args.instance_id.as_deref()) {
            return fail(reply, e);
        }
        if args.generation != self.generation {
            return fail(reply, ErrorCode::IllegalGeneration);
        }
        if args
            .protocol_type
            .as_ref()
            .is_some_and(|p| Some(p) != self.protocol_type.as_ref())
            || args
                .protocol_name
                .as_ref()
                .is_some_and(|p| Some(p) != self.protocol_name.as_ref())
        {
            return fail(reply, ErrorCode::InconsistentGroupProtocol);
        }
        match self.state {
            State::Empty => fail(reply, ErrorCode::UnknownMemberId),
            State::PreparingRebalance => fail(reply, ErrorCode::RebalanceInProgress),
            State::CompletingRebalance => {
                self.pending_sync.remove(&args.member_id);
                let member = self.members.get_mut(&args.member_id).expect("validated");
                member.session_deadline = now + member.session_timeout;
                if let Some(old) = member.sync.replace(reply) {
                    let _ = old.send(SyncResult::error(ErrorCode::RebalanceInProgress));
                }
                if self.leader.as_deref() == Some(args.member_id.as_str()) {
                    let assignments: HashMap<String, Bytes> = args
                        .assignments
                        .into_iter()
                        .filter(|(id, _)| self.members.contains_key(id))
                        .collect();
                    fx.stores.push((
                        self.snapshot(Some(&assignments)),
                        AfterStore::Assignments {
                            generation: self.generation,
                            assignments,
                        },
                    ));
                }
            }
            State::Stable => {
                self.pending_sync.remove(&args.member_id);
                let member = self.members.get_mut(&args.member_id).expect("validated");
                member.session_deadline = now + member.session_timeout;
                let _ = reply.send(SyncResult {
                    error: ErrorCode::None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: member.assignment.clone(),
                });
            }
            State::Dead => unreachable!("checked above"),
        }
    }

    /// The leader's assignments of `generation` are stored.
    pub fn assignments_stored(&mut self, generation: i32, assignments: HashMap<String, Bytes>) {
        if self.state != State::CompletingRebalance || self.generation != generation {
            return;
        }
        for m in self.members.values_mut() {
            m.assignment = assignments.get(&m.member_id).cloned().unwrap_or_default();
            if let Some(w) = m.sync.take() {
                let _ = w.send(SyncResult {
                    error: ErrorCode::None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                });
            }
        }
        self.set_state(State::Stable);
        tracing::info!(group = %self.group_id, generation, "group is stable");
    }

    /// Storing the assignments failed: everyone rejoins.
    pub fn assignments_failed(
        &mut self,
        generation: i32,
        error: ErrorCode,
        now: Instant,
        fx: &mut Effects,
    ) {
        if self.state == State::CompletingRebalance && self.generation == generation {
            self.reset_assignments(error);
            self.prepare_rebalance(now, fx);
        }
    }

    // ---- Heartbeat, LeaveGroup ---------------------------------------------

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> ErrorCode {
        match self.state {
            State::Dead => return ErrorCode::CoordinatorNotAvailable,
            State::Empty => return ErrorCode::UnknownMemberId,
            _ => {}
        }
        if let Err(e) = self.validate_member(member_id, instance_id) {
            return e;
        }
        if generation != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        let member = self.members.get_mut(member_id).expect("validated");
        member.session_deadline = now + member.session_timeout;
        if self.state == State::PreparingRebalance {
            ErrorCode::RebalanceInProgress
        } else {
            ErrorCode::None
        }
    }

    pub fn leave(
        &mut self,
        leaving: &[LeaveMember],
        now: Instant,
        fx: &mut Effects,
    ) -> Vec<ErrorCode> {
        let mut out = Vec::with_capacity(leaving.len());
        for l in leaving {
            let code = if let Some(instance) = &l.instance_id {
                match self.statics.get(instance).cloned() {
                    None => ErrorCode::UnknownMemberId,
                    Some(id) if !l.member_id.is_empty() && id != l.member_id => {
                        ErrorCode::FencedInstanceId
                    }
                    Some(id) => {
                        self.remove_member_and_update(&id, now, fx);
                        ErrorCode::None
                    }
                }
            } else if self.pending.remove(&l.member_id).is_some() {
                self.try_complete_join(now, fx);
                ErrorCode::None
            } else if self.members.contains_key(&l.member_id) {
                self.remove_member_and_update(&l.member_id, now, fx);
                ErrorCode::None
            } else {
                ErrorCode::UnknownMemberId
            };
            if code == ErrorCode::None {
                tracing::info!(group = %self.group_id, member = %l.member_id, reason = ?l.reason, "member left the group");
            }
            out.push(code);
        }
        out
    }

    // ---- OffsetCommit, describe ---------------------------------------------

    /// Whether an offset commit by `member_id`/`generation` is accepted now.
    pub fn validate_commit(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
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
        if self.state == State::CompletingRebalance {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> GroupsConfig {
        GroupsConfig {
            initial_rebalance_delay: Duration::from_millis(100),
            ..GroupsConfig::default()
        }
    }

    fn join_args(member_id: &str, instance: Option<&str>) -> JoinArgs {
        JoinArgs {
            group_id: "g".into(),
            member_id: member_id.into(),
            instance_id: instance.map(str::to_owned),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            require_known_member_id: true,
        }
    }

    fn join(
        g: &mut ClassicGroup,
        a: JoinArgs,
        now: Instant,
        fx: &mut Effects,
    ) -> oneshot::Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        g.join(a, tx, now, fx);
        rx
    }

    /// Joins a new dynamic member the KIP-394 way; returns its id and the
    /// pending answer of the second join.
    fn join_new(
        g: &mut ClassicGroup,
        now: Instant,
        fx: &mut Effects,
    ) -> (String, oneshot::Receiver<JoinResult>) {
        let mut first = join(g, join_args("", None), now, fx);
        let r = first.try_recv().unwrap().unwrap();
        assert_eq!(r.error, ErrorCode::MemberIdRequired);
        let id = r.member_id;
        let rx = join(g, join_args(&id, None), now, fx);
        (id, rx)
    }

    #[test]
    fn two_members_rebalance_sync_and_one_expires() {
        let mut g = ClassicGroup::new("g".into(), cfg());
        let mut fx = Effects::default();
        let t0 = Instant::now();
        let (a, mut ja) = join_new(&mut g, t0, &mut fx);
        let (b, mut jb) = join_new(&mut g, t0, &mut fx);
        assert_eq!(g.state, State::PreparingRebalance);
        assert!(
            ja.try_recv().unwrap().is_none(),
            "initial delay holds the join"
        );
        g.on_timer(t0 + Duration::from_millis(100), &mut fx);
        // New members came during the delay: it is extended once.
        assert_eq!(g.state, State::PreparingRebalance);
        g.on_timer(t0 + Duration::from_millis(200), &mut fx);
        assert_eq!(g.state, State::CompletingRebalance);
        let ra = ja.try_recv().unwrap().unwrap();
        let rb = jb.try_recv().unwrap().unwrap();
        assert_eq!(ra.generation, 1);
        assert_eq!(ra.leader, a);
        assert_eq!(ra.members.len(), 2, "the leader gets the members");
        assert!(rb.members.is_empty());
        // Follower syncs first, then the leader.
        let (tx, mut sb) = oneshot::channel();
        let sync = |m: &str, asg: Vec<(String, Bytes)>| SyncArgs {
            group_id: "g".into(),
            member_id: m.into(),
            instance_id: None,
            generation: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: asg,
        };
        g.sync(sync(&b, vec![]), tx, t0, &mut fx);
        let (tx, mut sa) = oneshot::channel();
        let asg = vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ];
        g.sync(sync(&a, asg), tx, t0, &mut fx);
        let (_, after) = fx.stores.pop().expect("assignments stored");
        let AfterStore::Assignments {
            generation,
            assignments,
        } = after
        else {
            panic!("wrong continuation")
        };
        g.assignments_stored(generation, assignments);
        assert_eq!(g.state, State::Stable);
        assert_eq!(&sa.try_recv().unwrap().unwrap().assignment[..], b"A");
        assert_eq!(&sb.try_recv().unwrap().unwrap().assignment[..], b"B");
        // Heartbeats: a stale generation is refused.
        assert_eq!(g.heartbeat(&a, None, 0, t0), ErrorCode::IllegalGeneration);
        assert_eq!(
            g.heartbeat("nobody", None, 1, t0),
            ErrorCode::UnknownMemberId
        );
        // a keeps heartbeating, b dies: b expires and a rebalance starts.
        let t1 = t0 + Duration::from_secs(8);
        assert_eq!(g.heartbeat(&a, None, 1, t1), ErrorCode::None);
        g.on_timer(t0 + Duration::from_secs(11), &mut fx);
        assert!(!g.members.contains_key(&b));
        assert_eq!(g.state, State::PreparingRebalance);
        assert_eq!(
            g.heartbeat(&a, None, 1, t0 + Duration::from_secs(11)),
            ErrorCode::RebalanceInProgress
        );
        // a rejoins: alone, the join completes at once (no initial delay).
        let mut ja = join(&mut g, join_args(&a, None), t1, &mut fx);
        let r = ja.try_recv().unwrap().unwrap();
        assert_eq!(r.generation, 2);
        assert_eq!(g.state, State::CompletingRebalance);
    }

    #[test]
    fn static_member_restart_keeps_its_assignment() {
        let mut g = ClassicGroup::new("g".into(), cfg());
        let mut fx = Effects::default();
        let t0 = Instant::now();
        let mut j = join(&mut g, join_args("", Some("i1")), t0, &mut fx);
        g.on_timer(t0 + Duration::from_millis(100), &mut fx);
        g.on_timer(t0 + Duration::from_millis(200), &mut fx);
        let r = j.try_recv().unwrap().unwrap();
        assert_eq!(
            r.error,
            ErrorCode::None,
            "static members need no member id round"
        );
        let (tx, _s) = oneshot::channel();
        g.sync(
            SyncArgs {
                group_id: "g".into(),
                member_id: r.member_id.clone(),
                instance_id: Some("i1".into()),
                generation: r.generation,
                protocol_type: None,
                protocol_name: None,
                assignments: vec![(r.member_id.clone(), Bytes::from_static(b"A"))],
            },
            tx,
            t0,
            &mut fx,
        );
        let (
            _,
            AfterStore::Assignments {
                generation,
                assignments,
            },
        ) = fx.stores.pop().unwrap()
        else {
            panic!()
        };
        g.assignments_stored(generation, assignments);
        // Restart: new join with no member id, same instance id.
        let before = fx.rebalances;
        let mut j2 = join(&mut g, join_args("", Some("i1")), t0, &mut fx);
        assert_eq!(fx.rebalances, before, "no rebalance");
        assert_eq!(g.state, State::Stable);
        let (_, AfterStore::StaticRejoin { reply, result }) = fx.stores.pop().unwrap() else {
            panic!()
        };
        let _ = reply.send(result);
        let r2 = j2.try_recv().unwrap().unwrap();
        assert_ne!(r2.member_id, r.member_id);
        assert_eq!(r2.generation, r.generation);
        assert_eq!(&g.members[&r2.member_id].assignment[..], b"A");
        // The old member id is fenced.
        assert_eq!(
            g.heartbeat(&r.member_id, Some("i1"), r.generation, t0),
            ErrorCode::FencedInstanceId
        );
    }

    #[test]
    fn commit_rules() {
        let mut g = ClassicGroup::new("g".into(), cfg());
        let t0 = Instant::now();
        assert_eq!(g.validate_commit("", None, -1, t0), Ok(()));
        assert_eq!(
            g.validate_commit("m", None, 3, t0),
            Err(ErrorCode::UnknownMemberId)
        );
        let mut fx = Effects::default();
        let (a, _ja) = join_new(&mut g, t0, &mut fx);
        assert_eq!(
            g.validate_commit("", None, -1, t0),
            Err(ErrorCode::UnknownMemberId),
            "a simple commit needs an empty group"
        );
        assert_eq!(
            g.validate_commit(&a, None, 7, t0),
            Err(ErrorCode::IllegalGeneration)
        );
    }
}
