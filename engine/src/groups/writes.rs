//! A group's writes to PostgreSQL: what is written (group state, offsets,
//! deletions), how each runs under the epoch the group was loaded with,
//! and what its result does (answers the calls waiting on it, or finds
//! the group fenced by another agent's load).

use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::channel::oneshot;
use rutomq_meta::groups::{OffsetCommit, StoredGroup};
use rutomq_meta::MetaError;
use uuid::Uuid;

use super::classic::{AfterStore, Effects};
use super::consumer::HeartbeatResult;
use super::coordinator::{Coordinator, Done, Loaded};
use super::share::ShareHeartbeatResult;
use super::stored::GroupType;
use super::streams::StreamsHeartbeatResult;
use super::{GroupStats, JoinResult, TxnTarget, Written};
use crate::coordinator::WriteQueue;
use crate::error::ErrorCode;
use rutomq_meta::txn::TxnOffsetCheck;

pub(super) enum Write {
    /// The group's state, and what waits for it to be stored.
    Group(Box<StoredGroup>, Vec<AfterStore>),
    Offsets(
        Vec<OffsetCommit>,
        Option<TxnTarget>,
        oneshot::Sender<Written>,
    ),
    DeleteOffsets(
        Vec<(Uuid, i32)>,
        Vec<ErrorCode>,
        oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
    ),
    Delete(oneshot::Sender<ErrorCode>),
}

pub(super) enum Wrote {
    Group(Vec<AfterStore>, Result<Option<i64>, MetaError>),
    Offsets(
        oneshot::Sender<Written>,
        Result<Option<Vec<(Uuid, i32)>>, MetaError>,
    ),
    TxnOffsets(
        oneshot::Sender<Written>,
        Result<(TxnOffsetCheck, Vec<(Uuid, i32)>), MetaError>,
    ),
    DeleteOffsets(
        Vec<ErrorCode>,
        oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
        Result<Option<u64>, MetaError>,
    ),
    Delete(oneshot::Sender<ErrorCode>, Result<bool, MetaError>),
}

impl Coordinator {
    /// Starts the group's next write if none is running.
    pub(super) fn start_write(&mut self, group_id: &str) {
        let Some((write, epoch, load_id)) = self.slots.start_write(group_id) else {
            return;
        };
        let meta = self.meta.clone();
        let agent_id = self.agent_id;
        let id = group_id.to_owned();
        self.results.spawn(async move {
            let wrote = match write {
                Write::Group(stored, afters) => {
                    Wrote::Group(afters, meta.store_group(*stored, epoch, agent_id).await)
                }
                Write::Offsets(offsets, None, reply) => {
                    Wrote::Offsets(reply, meta.commit_offsets(id.clone(), epoch, offsets).await)
                }
                // Pending in the transaction until it ends; the generation
                // was checked when it was queued.
                Write::Offsets(offsets, Some(t), reply) => Wrote::TxnOffsets(
                    reply,
                    meta.txn_commit_offsets(
                        t.transactional_id,
                        t.producer_id,
                        t.producer_epoch,
                        id.clone(),
                        epoch,
                        offsets,
                    )
                    .await,
                ),
                Write::DeleteOffsets(parts, codes, reply) => Wrote::DeleteOffsets(
                    codes,
                    reply,
                    meta.delete_offsets(id.clone(), epoch, parts).await,
                ),
                Write::Delete(reply) => {
                    Wrote::Delete(reply, meta.delete_group(id.clone(), epoch).await)
                }
            };
            Done::Wrote(id, load_id, wrote)
        });
    }

    pub(super) fn on_wrote(&mut self, group_id: String, load_id: u64, wrote: Wrote) {
        let now = Instant::now();
        let mut fenced = false;
        let mut unload = false;
        let mut fx = Effects::default();
        // The result of a write issued by an earlier load of the group (it
        // was unloaded and loaded again meanwhile) only answers its callers.
        let slot = self.slots.write_finished(&group_id, load_id);
        match wrote {
            Wrote::Group(afters, result) => {
                let code = match &result {
                    Ok(Some(_)) => ErrorCode::None,
                    Ok(None) => {
                        fenced = true;
                        ErrorCode::NotCoordinator
                    }
                    Err(e) => {
                        tracing::warn!(group = %group_id, error = %e, "cannot store group");
                        ErrorCode::CoordinatorNotAvailable
                    }
                };
                let mut slot = slot;
                if let (Some(l), Ok(Some(epoch))) = (slot.as_mut(), &result) {
                    l.epoch = *epoch;
                }
                if code == ErrorCode::CoordinatorNotAvailable
                    && slot.as_ref().is_some_and(|l| !l.state.is_classic())
                {
                    // Memory is ahead of PostgreSQL: answer nothing from it;
                    // the group loads again from what is stored.
                    unload = true;
                }
                for after in afters {
                    match after {
                        AfterStore::Assignments {
                            generation,
                            assignments,
                        } => {
                            if let Some(l) = slot.as_mut() {
                                if code == ErrorCode::None {
                                    l.state.group.assignments_stored(generation, assignments);
                                } else {
                                    l.state
                                        .group
                                        .assignments_failed(generation, code, now, &mut fx);
                                }
                            }
                        }
                        AfterStore::StaticRejoin { reply, result } => {
                            let _ = reply.send(if code == ErrorCode::None {
                                result
                            } else {
                                JoinResult::error(code, &result.member_id)
                            });
                        }
                        AfterStore::ConsumerHeartbeat { reply, result } => {
                            let _ = reply.send(if code == ErrorCode::None {
                                result
                            } else {
                                HeartbeatResult::error(code, None)
                            });
                        }
                        AfterStore::Stored(reply) => {
                            let _ = reply.send(code);
                        }
                        AfterStore::ShareHeartbeat { reply, result } => {
                            let _ = reply.send(if code == ErrorCode::None {
                                result
                            } else {
                                ShareHeartbeatResult::error(code, None)
                            });
                        }
                        AfterStore::StreamsHeartbeat { reply, result } => {
                            let _ = reply.send(if code == ErrorCode::None {
                                result
                            } else {
                                StreamsHeartbeatResult::error(code, None)
                            });
                        }
                        AfterStore::Nothing => {}
                    }
                }
            }
            Wrote::Offsets(reply, result) => {
                let answer = match result {
                    Ok(Some(written)) => Ok(written),
                    Ok(None) => {
                        fenced = true;
                        Err(ErrorCode::NotCoordinator)
                    }
                    Err(e) => {
                        tracing::warn!(group = %group_id, error = %e, "offset commit failed");
                        Err(ErrorCode::CoordinatorNotAvailable)
                    }
                };
                let _ = reply.send(answer);
            }
            Wrote::TxnOffsets(reply, result) => {
                let _ = reply.send(match result {
                    Ok((TxnOffsetCheck::Written, written)) => Ok(written),
                    Ok((TxnOffsetCheck::Fenced, _)) => Err(ErrorCode::InvalidProducerEpoch),
                    Ok((TxnOffsetCheck::NotInTransaction, _)) => Err(ErrorCode::InvalidTxnState),
                    Ok((TxnOffsetCheck::GroupFenced, _)) => {
                        fenced = true;
                        Err(ErrorCode::NotCoordinator)
                    }
                    Ok((
                        TxnOffsetCheck::UnknownTransactionalId | TxnOffsetCheck::ProducerIdMismatch,
                        _,
                    )) => Err(ErrorCode::InvalidProducerIdMapping),
                    Err(e) => {
                        tracing::warn!(group = %group_id, error = %e, "transactional offset commit failed");
                        Err(ErrorCode::CoordinatorNotAvailable)
                    }
                });
            }
            Wrote::DeleteOffsets(codes, reply, result) => {
                let _ = reply.send(match result {
                    Ok(Some(_)) => Ok(codes),
                    Ok(None) => {
                        fenced = true;
                        Err(ErrorCode::NotCoordinator)
                    }
                    Err(e) => {
                        tracing::warn!(group = %group_id, error = %e, "offset delete failed");
                        Err(ErrorCode::CoordinatorNotAvailable)
                    }
                });
            }
            Wrote::Delete(reply, result) => match result {
                Ok(true) => {
                    tracing::info!(group = %group_id, "group deleted");
                    if let Some(l) = slot {
                        l.state.consumer = None;
                        l.state.group.kill(ErrorCode::GroupIdNotFound);
                        fail_writes(&mut l.writes, ErrorCode::GroupIdNotFound);
                    }
                    let _ = reply.send(ErrorCode::None);
                }
                Ok(false) => {
                    fenced = true;
                    let _ = reply.send(ErrorCode::NotCoordinator);
                }
                Err(e) => {
                    tracing::warn!(group = %group_id, error = %e, "group delete failed");
                    let _ = reply.send(ErrorCode::CoordinatorNotAvailable);
                }
            },
        }
        let current = self.slots.current(&group_id, load_id).is_some();
        if !current {
            return;
        }
        if fenced {
            self.stats.fenced.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(group = %group_id, "another agent took this group over; dropping it here");
            self.unload(&group_id, ErrorCode::NotCoordinator);
            return;
        }
        if unload {
            self.unload(&group_id, ErrorCode::CoordinatorNotAvailable);
            return;
        }
        self.after(&group_id, fx);
    }
}

/// Queues a store of the group. A KIP-848 group's state is stored whole,
/// so a store still queued is replaced by the newer one and its waiters
/// join the newer one's: at most one store waits per group, however many
/// heartbeats change it.
pub(super) fn queue_store(l: &mut Loaded, stored: StoredGroup, after: AfterStore) {
    let kind = GroupType::of(&stored);
    if matches!(kind, GroupType::Consumer | GroupType::Streams) {
        for w in l.writes.iter_mut() {
            if let Write::Group(queued, afters) = w {
                if GroupType::of(queued) == kind {
                    **queued = stored;
                    afters.push(after);
                    return;
                }
            }
        }
    }
    l.writes.push(Write::Group(Box::new(stored), vec![after]));
}

/// Queues an accepted offset commit, after the group row if the group was
/// never stored (offsets refer to it).
pub(super) fn enqueue_offsets(
    l: &mut Loaded,
    offsets: Vec<OffsetCommit>,
    txn: Option<TxnTarget>,
    reply: oneshot::Sender<Written>,
    stats: &GroupStats,
) {
    if l.writes.is_full() {
        let _ = reply.send(Err(ErrorCode::CoordinatorLoadInProgress));
        return;
    }
    if l.epoch == 0
        && !l.writes.is_writing()
        && !l.writes.iter().any(|w| matches!(w, Write::Group(..)))
    {
        let stored = match (&l.state.consumer, &l.state.streams) {
            (Some(c), _) => c.snapshot(),
            (_, Some(s)) => s.snapshot(),
            _ => l.state.group.snapshot(None),
        };
        l.writes
            .push(Write::Group(Box::new(stored), vec![AfterStore::Nothing]));
    }
    stats.offset_commits.fetch_add(1, Ordering::Relaxed);
    l.writes.push(Write::Offsets(offsets, txn, reply));
}

/// Answers every queued write's callers with `error` (the write in flight
/// answers its own when it ends).
pub(super) fn fail_writes(writes: &mut WriteQueue<Write>, error: ErrorCode) {
    for w in writes.drain() {
        match w {
            Write::Group(_, afters) => {
                for after in afters {
                    match after {
                        AfterStore::StaticRejoin { reply, result } => {
                            let _ = reply.send(JoinResult::error(error, &result.member_id));
                        }
                        AfterStore::ConsumerHeartbeat { reply, .. } => {
                            let _ = reply.send(HeartbeatResult::error(error, None));
                        }
                        AfterStore::ShareHeartbeat { reply, .. } => {
                            let _ = reply.send(ShareHeartbeatResult::error(error, None));
                        }
                        AfterStore::StreamsHeartbeat { reply, .. } => {
                            let _ = reply.send(StreamsHeartbeatResult::error(error, None));
                        }
                        AfterStore::Stored(reply) => {
                            let _ = reply.send(error);
                        }
                        AfterStore::Assignments { .. } | AfterStore::Nothing => {}
                    }
                }
            }
            Write::Offsets(_, _, reply) => {
                let _ = reply.send(Err(error));
            }
            Write::DeleteOffsets(_, _, reply) => {
                let _ = reply.send(Err(error));
            }
            Write::Delete(reply) => {
                let _ = reply.send(error);
            }
        }
    }
}
