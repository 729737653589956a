//! JoinGroup: members join, the group rebalances, the join phase completes
//! with a new generation and its leader.

use std::time::Instant;

use bytes::Bytes;
use futures::channel::oneshot;

use super::{AfterStore, ClassicGroup, Effects, Member, State};
use crate::error::ErrorCode;
use crate::groups::{JoinArgs, JoinResult, SyncResult};

impl ClassicGroup {
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

    pub(super) fn prepare_rebalance(&mut self, now: Instant, fx: &mut Effects) {
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
    pub(super) fn reset_assignments(&mut self, error: ErrorCode) {
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

    pub(super) fn try_complete_join(&mut self, now: Instant, fx: &mut Effects) {
        if self.state == State::PreparingRebalance
            && self.initial_delay.is_none()
            && self.all_joined()
        {
            self.complete_join(now, fx);
        }
    }

    pub(super) fn complete_join(&mut self, now: Instant, fx: &mut Effects) {
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
    pub(super) fn remove_member(&mut self, member_id: &str) -> Option<Member> {
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

    pub(super) fn remove_member_and_update(
        &mut self,
        member_id: &str,
        now: Instant,
        fx: &mut Effects,
    ) {
        if self.remove_member(member_id).is_none() {
            return;
        }
        match self.state {
            State::Stable | State::CompletingRebalance => self.prepare_rebalance(now, fx),
            State::PreparingRebalance => self.try_complete_join(now, fx),
            State::Empty | State::Dead => {}
        }
    }
}
