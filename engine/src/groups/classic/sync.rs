//! SyncGroup (the leader's assignments, stored before anyone gets them),
//! Heartbeat and LeaveGroup.

use std::collections::HashMap;
use std::time::Instant;

use bytes::Bytes;
use futures::channel::oneshot;

use super::{AfterStore, ClassicGroup, Effects, State};
use crate::error::ErrorCode;
use crate::groups::{LeaveMember, SyncArgs, SyncResult};

impl ClassicGroup {
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
}
