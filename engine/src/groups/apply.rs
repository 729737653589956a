//! Applying a call to a loaded group: the routing between the kinds
//! (classic, KIP-848 consumer, share and streams groups never share an id,
//! except that an empty group may switch kind as Kafka converts it), the
//! calls every kind answers alike (DescribeGroups, DeleteGroups,
//! OffsetDelete), then each kind's own answer; and
//! [`Coordinator::after`], which queues the writes a call decided.

use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::channel::oneshot;

use super::calls::Call;
use super::calls::Failed;
use super::classic::{AfterStore, Effects, State};
use super::consumer::{ConsumerGroup, HeartbeatResult};
use super::coordinator::Coordinator;
use super::share::{ShareGroup, ShareHeartbeatResult};
use super::state::split_deletable;
use super::streams::{StreamsGroup, StreamsHeartbeatResult};
use super::writes::{enqueue_offsets, queue_store, Write};
use super::{
    ConsumerDescription, JoinResult, ShareDescription, StreamsDescription, SyncResult,
    TOPICS_REFRESH,
};
use crate::error::ErrorCode;

impl Coordinator {
    /// Applies a call to a loaded group.
    pub(super) fn apply(&mut self, group_id: &str, call: Call) {
        let now = Instant::now();
        let Some(l) = self.slots.get_mut(group_id) else {
            call.fail(ErrorCode::CoordinatorNotAvailable);
            return;
        };
        l.last_used = now;
        // The group exists: it was stored, or has members or writes. (A
        // loaded consumer group always does: one never stored and left
        // empty is dropped by `after`.)
        let known = l.epoch > 0 || !l.state.empty() || !l.writes.is_idle();
        // Share groups and the others never share an id (Kafka's rule).
        let share_call = matches!(
            call,
            Call::ShareHeartbeat(..) | Call::ShareDescribe { .. } | Call::ShareEmpty { .. }
        );
        let generic = matches!(
            call,
            Call::Describe { .. }
                | Call::Delete { .. }
                | Call::DeleteOffsets { .. }
                | Call::Adopt { .. }
        );
        if l.state.share.is_some() && !share_call && !generic {
            wrong_kind(group_id, call);
            return self.after(group_id, Effects::default());
        }
        if share_call && l.state.share.is_none() {
            let is_other = known || !l.state.empty();
            match call {
                Call::ShareHeartbeat(a, _, r) if is_other || a.member_epoch != 0 => {
                    let message = if is_other {
                        format!("Group {group_id} is not a share group.")
                    } else {
                        format!("Group {group_id} not found.")
                    };
                    let _ = r.send(ShareHeartbeatResult::error(
                        ErrorCode::GroupIdNotFound,
                        message,
                    ));
                    return self.after(group_id, Effects::default());
                }
                Call::ShareEmpty { reply, create, .. } if is_other || !create => {
                    if is_other {
                        tracing::debug!(group = %group_id, "share group offsets asked of a group of another type");
                    }
                    let _ = reply.send(ErrorCode::GroupIdNotFound);
                    return self.after(group_id, Effects::default());
                }
                Call::ShareDescribe { reply, .. } => {
                    let message = if is_other {
                        format!("Group {group_id} is not a share group.")
                    } else {
                        format!("Group {group_id} not found.")
                    };
                    let _ = reply.send(ShareDescription::error(
                        ErrorCode::GroupIdNotFound,
                        Some(message),
                    ));
                    return self.after(group_id, Effects::default());
                }
                call => {
                    l.state.share =
                        Some(ShareGroup::new(group_id.to_owned(), self.cfg.share.clone()));
                    return self.apply_share(group_id, call, known, now);
                }
            }
        }
        if let Some(call) = self.route_streams(group_id, call, known, now) {
            self.apply_other(group_id, call, known, now);
        }
    }

    /// Streams groups' side of the routing: a streams call to a group of
    /// another kind, or another kind's call to a streams group. `None`:
    /// answered.
    fn route_streams(
        &mut self,
        group_id: &str,
        call: Call,
        known: bool,
        now: Instant,
    ) -> Option<Call> {
        let Some(l) = self.slots.get_mut(group_id) else {
            call.fail(ErrorCode::CoordinatorNotAvailable);
            return None;
        };
        let streams_call = matches!(
            call,
            Call::StreamsHeartbeat(..) | Call::StreamsDescribe { .. }
        );
        if streams_call && l.state.streams.is_none() {
            // Only an empty classic group turns into a streams group (as
            // Kafka converts it); a new group is made by a joining member.
            let convertible = l.state.is_classic() && l.state.empty();
            let other = !convertible;
            match call {
                Call::StreamsHeartbeat(a, _, r) if other || a.member_epoch != 0 => {
                    let message = if other || known {
                        format!("Group {group_id} is not a streams group.")
                    } else {
                        format!("Streams group {group_id} not found.")
                    };
                    let _ = r.send(StreamsHeartbeatResult::error(
                        ErrorCode::GroupIdNotFound,
                        message,
                    ));
                    self.after(group_id, Effects::default());
                    return None;
                }
                Call::StreamsDescribe { reply, .. } => {
                    let message = if known {
                        format!("Group {group_id} is not a streams group.")
                    } else {
                        format!("Group {group_id} not found.")
                    };
                    let mut d = StreamsDescription::failed(ErrorCode::GroupIdNotFound);
                    d.error_message = Some(message);
                    let _ = reply.send(d);
                    self.after(group_id, Effects::default());
                    return None;
                }
                call => {
                    let mut g = StreamsGroup::new(group_id.to_owned(), self.cfg.streams.clone());
                    g.group_epoch = l.state.group.generation;
                    g.assignment_epoch = l.state.group.generation;
                    l.state.streams = Some(g);
                    self.apply_streams(group_id, call, known, now);
                    // A refused join leaves the group as it was.
                    if let Some(l) = self.slots.get_mut(group_id) {
                        if l.state
                            .streams
                            .as_ref()
                            .is_some_and(|s| s.topology.is_none())
                        {
                            l.state.streams = None;
                        }
                    }
                    return None;
                }
            }
        }
        if l.state.streams.is_some() {
            let classic_call = matches!(
                call,
                Call::Join(..) | Call::Sync(..) | Call::Heartbeat { .. } | Call::Leave { .. }
            );
            if classic_call && l.state.empty() && matches!(call, Call::Join(..)) {
                // An empty streams group becomes a classic one.
                l.state.streams = None;
                return Some(call);
            }
            match call {
                call @ (Call::Describe { .. }
                | Call::Delete { .. }
                | Call::DeleteOffsets { .. }) => return Some(call),
                call @ (Call::Commit(..)
                | Call::ValidateFetch { .. }
                | Call::StreamsHeartbeat(..)
                | Call::StreamsDescribe { .. }
                | Call::Adopt { .. }) => {
                    self.apply_streams(group_id, call, known, now);
                    return None;
                }
                call => wrong_kind(group_id, call),
            }
            self.after(group_id, Effects::default());
            return None;
        }
        Some(call)
    }

    /// The calls of classic and consumer groups, and those every kind
    /// answers alike.
    fn apply_other(&mut self, group_id: &str, call: Call, known: bool, now: Instant) {
        let Some(l) = self.slots.get_mut(group_id) else {
            call.fail(ErrorCode::CoordinatorNotAvailable);
            return;
        };
        // A call of the other protocol: an empty group switches protocol
        // (Kafka converts empty groups), a group with members refuses it.
        let classic_call = matches!(
            call,
            Call::Join(..) | Call::Sync(..) | Call::Heartbeat { .. } | Call::Leave { .. }
        );
        if classic_call && l.state.consumer.is_some() {
            if !l.state.empty() || !matches!(call, Call::Join(..)) {
                match call {
                    Call::Join(a, r) => {
                        let _ = r.send(JoinResult::error(
                            ErrorCode::InconsistentGroupProtocol,
                            &a.member_id,
                        ));
                    }
                    other => other.fail(ErrorCode::UnknownMemberId),
                }
                return self.after(group_id, Effects::default());
            }
            l.state.consumer = None;
        }
        if matches!(call, Call::ConsumerHeartbeat(..)) && l.state.consumer.is_none() {
            if !l.state.group.idle() {
                if let Call::ConsumerHeartbeat(_, _, r) = call {
                    let _ = r.send(HeartbeatResult::error(
                        ErrorCode::GroupIdNotFound,
                        format!("group {group_id} is a classic group with members"),
                    ));
                }
                return self.after(group_id, Effects::default());
            }
            let mut c = ConsumerGroup::new(group_id.to_owned(), self.cfg.clone());
            c.group_epoch = l.state.group.generation;
            c.assignment_epoch = l.state.group.generation;
            l.state.consumer = Some(c);
        }
        let call = match call {
            Call::Describe { reply, .. } => {
                let _ = reply.send(l.state.describe(known));
                return self.after(group_id, Effects::default());
            }
            Call::Delete { reply, .. } => {
                match l.state.deletable(known) {
                    Err(e) => {
                        let _ = reply.send(e);
                    }
                    Ok(()) if l.state.consumer.is_none() && l.epoch == 0 && l.writes.is_idle() => {
                        // A classic group never stored: nothing to delete
                        // but the memory.
                        l.state.group.kill(ErrorCode::GroupIdNotFound);
                        let _ = reply.send(ErrorCode::None);
                    }
                    Ok(()) => l.writes.push(Write::Delete(reply)),
                }
                return self.after(group_id, Effects::default());
            }
            Call::DeleteOffsets {
                partitions, reply, ..
            } => {
                match l.state.offsets_deletable(known, &self.topics) {
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                    Ok(subscribed) => {
                        let (codes, deletable) = split_deletable(partitions, &subscribed);
                        if l.state.consumer.is_none() && l.epoch == 0 {
                            // A classic group never stored has no offsets
                            // to delete.
                            let _ = reply.send(Ok(codes));
                        } else {
                            l.writes.push(Write::DeleteOffsets(deletable, codes, reply));
                        }
                    }
                }
                return self.after(group_id, Effects::default());
            }
            other => other,
        };
        if l.state.share.is_some() {
            self.apply_share(group_id, call, known, now);
        } else if l.state.consumer.is_some() {
            self.apply_consumer(group_id, call, known, now);
        } else {
            self.apply_classic(group_id, call, known, now);
        }
    }

    /// Applies a call to a classic group.
    fn apply_classic(&mut self, group_id: &str, call: Call, known: bool, now: Instant) {
        let Some(l) = self.slots.get_mut(group_id) else {
            return call.fail(ErrorCode::CoordinatorNotAvailable);
        };
        let mut fx = Effects::default();
        let g = &mut l.state.group;
        match call {
            Call::Join(args, reply) => {
                if !known && !args.member_id.is_empty() {
                    let _ = reply.send(JoinResult::error(
                        ErrorCode::UnknownMemberId,
                        &args.member_id,
                    ));
                } else {
                    g.join(args, reply, now, &mut fx);
                }
            }
            Call::Sync(args, reply) => {
                if known {
                    g.sync(args, reply, now, &mut fx);
                } else {
                    let _ = reply.send(SyncResult::error(ErrorCode::UnknownMemberId));
                }
            }
            Call::Heartbeat {
                member_id,
                instance_id,
                generation,
                reply,
                ..
            } => {
                let code = if known {
                    g.heartbeat(&member_id, instance_id.as_deref(), generation, now)
                } else {
                    ErrorCode::UnknownMemberId
                };
                let _ = reply.send(code);
            }
            Call::Leave { members, reply, .. } => {
                let codes = if known {
                    if g.state == State::Dead {
                        Err(ErrorCode::CoordinatorNotAvailable)
                    } else {
                        Ok(g.leave(&members, now, &mut fx))
                    }
                } else {
                    Ok(vec![ErrorCode::UnknownMemberId; members.len()])
                };
                let _ = reply.send(codes);
            }
            Call::Commit(args, reply) => {
                let verdict = if !known && args.generation >= 0 {
                    Err(if args.group_must_exist {
                        ErrorCode::GroupIdNotFound
                    } else {
                        ErrorCode::IllegalGeneration
                    })
                } else {
                    g.validate_commit(
                        &args.member_id,
                        args.instance_id.as_deref(),
                        args.generation,
                        args.txn.is_some(),
                        now,
                    )
                };
                match verdict {
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                    Ok(()) => {
                        for (stored, after) in fx.stores.drain(..) {
                            queue_store(l, stored, after);
                        }
                        enqueue_offsets(l, args.offsets, args.txn, reply, &self.stats);
                    }
                }
            }
            Call::ConsumerDescribe { reply, .. } => {
                let _ = reply.send(ConsumerDescription::error(
                    ErrorCode::GroupIdNotFound,
                    Some(format!("group {group_id} is not a consumer group")),
                ));
            }
            Call::ValidateFetch { reply, .. } => {
                // Classic groups do not check who fetches (as in Kafka).
                let _ = reply.send(if known && g.state != State::Dead {
                    ErrorCode::None
                } else {
                    ErrorCode::GroupIdNotFound
                });
            }
            Call::ConsumerHeartbeat(..) => unreachable!("routed to apply_consumer"),
            Call::ShareHeartbeat(..) | Call::ShareDescribe { .. } | Call::ShareEmpty { .. } => {
                unreachable!("routed to apply_share")
            }
            Call::StreamsHeartbeat(..) | Call::StreamsDescribe { .. } => {
                unreachable!("routed to apply_streams")
            }
            Call::Describe { .. } | Call::Delete { .. } | Call::DeleteOffsets { .. } => {
                unreachable!("answered by apply")
            }
            Call::Adopt { .. } => {}
        }
        self.after(group_id, fx);
    }

    /// Applies a call to a KIP-848 consumer group.
    fn apply_consumer(&mut self, group_id: &str, call: Call, known: bool, now: Instant) {
        let Some(l) = self.slots.get_mut(group_id) else {
            return call.fail(ErrorCode::CoordinatorNotAvailable);
        };
        let mut fx = Effects::default();
        let c = l.state.consumer.as_mut().expect("a consumer group");
        match call {
            Call::ConsumerHeartbeat(args, resolved, reply) => {
                learn(&mut self.topics, resolved);
                if args
                    .subscribed_topic_regex
                    .as_ref()
                    .is_some_and(|r| !r.is_empty())
                {
                    // Learn every topic soon (the next sweep).
                    self.topics_refreshed = now.checked_sub(TOPICS_REFRESH).unwrap_or(now);
                }
                let mut changed = false;
                let result = c.heartbeat(args, &self.topics, now, &mut changed);
                let ok = result.error == ErrorCode::None;
                answer_heartbeat(
                    &mut fx,
                    changed,
                    ok,
                    || c.snapshot(),
                    reply,
                    result,
                    |reply, result| AfterStore::ConsumerHeartbeat { reply, result },
                );
            }
            Call::ConsumerDescribe { reply, .. } => {
                let d = if known {
                    ConsumerDescription {
                        error: ErrorCode::None,
                        error_message: None,
                        state: c.state(),
                        group_epoch: c.group_epoch,
                        assignment_epoch: c.assignment_epoch,
                        assignor: c.assignor.clone(),
                        members: c
                            .members
                            .values()
                            .map(|m| {
                                let target =
                                    c.target.get(&m.member_id).cloned().unwrap_or_default();
                                (m.clone(), target)
                            })
                            .collect(),
                    }
                } else {
                    ConsumerDescription::error(
                        ErrorCode::GroupIdNotFound,
                        Some(format!("group {group_id} not found")),
                    )
                };
                let _ = reply.send(d);
            }
            Call::Commit(args, reply) if !args.group_must_exist && !args.member_id.is_empty() => {
                // A KIP-848 member commits with OffsetCommit v9+ (member epochs).
                let _ = reply.send(Err(ErrorCode::UnsupportedVersion));
            }
            Call::Commit(args, reply) => {
                match c.validate_commit(&args.member_id, args.generation) {
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                    Ok(()) => enqueue_offsets(l, args.offsets, args.txn, reply, &self.stats),
                }
            }
            Call::ValidateFetch {
                member_id,
                member_epoch,
                reply,
                ..
            } => {
                let _ = reply.send(match c.members.get(&member_id) {
                    None => ErrorCode::UnknownMemberId,
                    Some(m) if m.epoch != member_epoch => ErrorCode::StaleMemberEpoch,
                    Some(_) => ErrorCode::None,
                });
            }
            Call::Adopt { .. } => {}
            other => other.fail(ErrorCode::UnknownMemberId),
        }
        self.after(group_id, fx);
    }

    /// Applies a call to a share group.
    fn apply_share(&mut self, group_id: &str, call: Call, known: bool, now: Instant) {
        let Some(l) = self.slots.get_mut(group_id) else {
            return call.fail(ErrorCode::CoordinatorNotAvailable);
        };
        let mut fx = Effects::default();
        let g = l.state.share.as_mut().expect("a share group");
        match call {
            Call::ShareHeartbeat(args, resolved, reply) => {
                learn(&mut self.topics, resolved);
                let mut changed = false;
                let result = g.heartbeat(args, &self.topics, now, &mut changed);
                let ok = result.error == ErrorCode::None;
                answer_heartbeat(
                    &mut fx,
                    changed,
                    ok,
                    || g.snapshot(),
                    reply,
                    result,
                    |reply, result| AfterStore::ShareHeartbeat { reply, result },
                );
            }
            Call::ShareDescribe { reply, .. } => {
                let _ = reply.send(ShareDescription {
                    error: ErrorCode::None,
                    error_message: None,
                    state: g.state(),
                    group_epoch: g.group_epoch,
                    assignment_epoch: g.assignment_epoch,
                    members: g.members.values().cloned().collect(),
                });
            }
            Call::ShareEmpty { reply, .. } => {
                if !g.is_empty() {
                    let _ = reply.send(ErrorCode::NonEmptyGroup);
                } else if known {
                    let _ = reply.send(ErrorCode::None);
                } else {
                    // New: stored first (its share-partitions refer to it).
                    fx.stores.push((g.snapshot(), AfterStore::Stored(reply)));
                }
            }
            Call::Adopt { .. } => {}
            other => other.fail(ErrorCode::GroupIdNotFound),
        }
        self.after(group_id, fx);
    }

    /// Applies a call to a streams group.
    fn apply_streams(&mut self, group_id: &str, call: Call, known: bool, now: Instant) {
        let Some(l) = self.slots.get_mut(group_id) else {
            return call.fail(ErrorCode::CoordinatorNotAvailable);
        };
        let mut fx = Effects::default();
        let g = l.state.streams.as_mut().expect("a streams group");
        match call {
            Call::StreamsHeartbeat(args, resolved, reply) => {
                learn(&mut self.topics, resolved);
                let mut changed = false;
                let result = g.heartbeat(*args, &self.topics, now, &mut changed);
                let ok = result.error == ErrorCode::None;
                answer_heartbeat(
                    &mut fx,
                    changed,
                    ok,
                    || g.snapshot(),
                    reply,
                    result,
                    |reply, result| AfterStore::StreamsHeartbeat { reply, result },
                );
            }
            Call::StreamsDescribe { reply, .. } => {
                let d = if known || !g.is_empty() {
                    StreamsDescription {
                        error: ErrorCode::None,
                        error_message: None,
                        state: g.state(),
                        group_epoch: g.group_epoch,
                        assignment_epoch: g.assignment_epoch,
                        topology: g.topology.clone(),
                        partitions: g
                            .configured
                            .as_ref()
                            .filter(|c| c.is_ready())
                            .map(|c| c.partitions.clone()),
                        members: g
                            .members
                            .values()
                            .map(|m| {
                                let target =
                                    g.target.get(&m.member_id).cloned().unwrap_or_default();
                                (m.clone(), target)
                            })
                            .collect(),
                    }
                } else {
                    let mut d = StreamsDescription::failed(ErrorCode::GroupIdNotFound);
                    d.error_message = Some(format!("Group {group_id} not found."));
                    d
                };
                let _ = reply.send(d);
            }
            Call::Commit(args, reply) => {
                let transactional = args.txn.is_some();
                let verdict = if transactional && args.generation < 0 && args.member_id.is_empty() {
                    Ok(())
                } else if !transactional
                    && !args.group_must_exist
                    && g.members.contains_key(&args.member_id)
                {
                    Err((
                        ErrorCode::UnsupportedVersion,
                        "OffsetCommit version 9 or above must be used by members using the streams group protocol".to_owned(),
                    ))
                } else {
                    let committed: Vec<(&str, i32)> = args
                        .offsets
                        .iter()
                        .map(|o| {
                            let name = args.topic_names.get(&o.topic_id);
                            (name.map_or("", String::as_str), o.partition)
                        })
                        .collect();
                    g.validate_commit(&args.member_id, args.generation, &committed)
                };
                match verdict {
                    Err((mut e, message)) => {
                        tracing::debug!(group = %group_id, member = %args.member_id, error = ?e, %message, "streams group offset commit refused");
                        if transactional && e == ErrorCode::StaleMemberEpoch {
                            e = ErrorCode::IllegalGeneration;
                        }
                        let _ = reply.send(Err(e));
                    }
                    Ok(()) => enqueue_offsets(l, args.offsets, args.txn, reply, &self.stats),
                }
            }
            Call::ValidateFetch {
                member_id,
                member_epoch,
                reply,
                ..
            } => {
                let _ = reply.send(g.validate_fetch(&member_id, member_epoch));
            }
            Call::Adopt { .. } => {}
            other => other.fail(ErrorCode::UnknownMemberId),
        }
        self.after(group_id, fx);
    }

    /// Queues a group's writes, starts the next, re-arms its timer, and
    /// forgets a group that does not exist.
    pub(super) fn after(&mut self, group_id: &str, mut fx: Effects) {
        self.stats
            .rebalances
            .fetch_add(fx.rebalances, Ordering::Relaxed);
        self.stats
            .members_expired
            .fetch_add(fx.expired, Ordering::Relaxed);
        let Some(l) = self.slots.get_mut(group_id) else {
            return;
        };
        for (stored, after) in fx.stores.drain(..) {
            queue_store(l, stored, after);
        }
        if l.state.group.state == State::Dead && l.writes.is_idle() {
            self.slots.remove(group_id);
            return;
        }
        if l.epoch == 0 && l.unloadable() {
            // Asked about, never created: nothing to keep.
            self.slots.remove(group_id);
            return;
        }
        self.start_write(group_id);
        self.slots.schedule(group_id);
    }
}

/// Topics a heartbeat's handler resolved from its shard's cache: they only
/// fill in topics the coordinator's view does not know yet (the cache may
/// be older).
fn learn(topics: &mut super::consumer::TopicsView, resolved: Vec<(String, uuid::Uuid, i32)>) {
    for (name, id, partitions) in resolved {
        topics.entry(name).or_insert((id, partitions));
    }
}

/// A heartbeat's answer: sent once the group is stored when the heartbeat
/// changed it and was accepted, at once otherwise (a refused heartbeat
/// that changed the group stores it all the same).
fn answer_heartbeat<R>(
    fx: &mut Effects,
    changed: bool,
    accepted: bool,
    snapshot: impl FnOnce() -> rutomq_meta::groups::StoredGroup,
    reply: oneshot::Sender<R>,
    result: R,
    after: fn(oneshot::Sender<R>, R) -> AfterStore,
) {
    if changed && accepted {
        fx.stores.push((snapshot(), after(reply, result)));
        return;
    }
    if changed {
        fx.stores.push((snapshot(), AfterStore::Nothing));
    }
    let _ = reply.send(result);
}

/// Answers a call of one kind of group made to a group of another kind
/// (Kafka's errors and words).
fn wrong_kind(group_id: &str, call: Call) {
    let not_a = |kind: &str| format!("Group {group_id} is not a {kind} group.");
    match call {
        Call::Join(a, r) => {
            let _ = r.send(JoinResult::error(
                ErrorCode::InconsistentGroupProtocol,
                &a.member_id,
            ));
        }
        Call::ConsumerHeartbeat(_, _, r) => {
            let _ = r.send(HeartbeatResult::error(
                ErrorCode::GroupIdNotFound,
                not_a("consumer"),
            ));
        }
        Call::ConsumerDescribe { reply, .. } => {
            let _ = reply.send(ConsumerDescription::error(
                ErrorCode::GroupIdNotFound,
                Some(not_a("consumer")),
            ));
        }
        Call::StreamsHeartbeat(_, _, r) => {
            let _ = r.send(StreamsHeartbeatResult::error(
                ErrorCode::GroupIdNotFound,
                not_a("streams"),
            ));
        }
        Call::StreamsDescribe { reply, .. } => {
            let mut d = StreamsDescription::failed(ErrorCode::GroupIdNotFound);
            d.error_message = Some(not_a("streams"));
            let _ = reply.send(d);
        }
        other => other.fail(ErrorCode::GroupIdNotFound),
    }
}
