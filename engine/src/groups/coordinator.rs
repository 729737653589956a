//! The group coordinator's loop: one thread owns every group the agent
//! coordinates (no locks). It admits calls (loading a group from
//! PostgreSQL on first use), applies them in arrival order
//! ([`super::apply`]), runs the groups' timers, and periodically drops
//! groups it no longer owns or that sit idle, adopts groups whose
//! coordinator died, refreshes subscribed topics and expires offsets.
//! The keyed slots, write queues and timers are the shared
//! [`crate::coordinator`] machinery.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures::channel::oneshot;
use rutomq_meta::groups::{GroupListing, StoredGroup};
use rutomq_meta::{Meta, MetaError};
use tokio::sync::mpsc;

use super::calls::{Call, Msg};
use super::classic::{AfterStore, ClassicGroup, Effects, State};
use super::consumer::{ConsumerGroup, TopicsView};
use super::share::ShareGroup;
use super::state::Group;
use super::stored::GroupType;
use super::streams::StreamsGroup;
use super::writes::{fail_writes, Write, Wrote};
use super::{
    GroupStats, GroupsConfig, Listed, ADOPT_INTERVAL, IDLE_UNLOAD, OFFSETS_RETENTION_CHECK,
    SWEEP_INTERVAL, TOPICS_REFRESH,
};
use crate::coordinator::{self, Admit, Limits, Owns, Results, Slot};
use crate::error::ErrorCode;
use crate::limits::{
    GROUPS_LOADED_MAX, GROUP_LAG_ROWS_MAX, GROUP_WRITES_QUEUED_MAX, LOAD_WAITERS_MAX,
};

pub(super) type Slots = coordinator::Slots<Call, Group, Write>;
pub(super) type Loaded = coordinator::Loaded<Group, Write>;

const LIMITS: Limits = Limits {
    keys_loaded_max: GROUPS_LOADED_MAX,
    load_waiters_max: LOAD_WAITERS_MAX,
    writes_queued_max: GROUP_WRITES_QUEUED_MAX,
};

/// What spawned PostgreSQL work brings back to the loop.
pub(super) enum Done {
    Loaded(String, Result<Option<(StoredGroup, i64)>, MetaError>),
    /// A write's result: group id, the load it was issued by, the result.
    Wrote(String, u64, Wrote),
    Listed(
        Result<Vec<GroupListing>, MetaError>,
        oneshot::Sender<Result<Vec<Listed>, ErrorCode>>,
    ),
    Orphans(Result<Vec<String>, MetaError>),
    Topics(
        Vec<String>,
        Result<Vec<rutomq_meta::TopicRecord>, MetaError>,
    ),
}

pub(super) struct Coordinator {
    pub(super) meta: Meta,
    pub(super) agent_id: i32,
    owns: Owns,
    pub(super) cfg: GroupsConfig,
    pub(super) slots: Slots,
    pub(super) results: Results<Done>,
    pub(super) stats: Arc<GroupStats>,
    /// Topics consumer groups subscribe to, refreshed every
    /// `TOPICS_REFRESH` while such groups are loaded.
    pub(super) topics: TopicsView,
    pub(super) topics_refreshed: Instant,
}

impl Coordinator {
    /// A coordinator, and the receiving end of its results.
    pub(super) fn new(
        meta: Meta,
        agent_id: i32,
        owns: Owns,
        cfg: GroupsConfig,
        stats: Arc<GroupStats>,
    ) -> (Coordinator, mpsc::Receiver<Done>) {
        let (results, done_rx) = Results::channel();
        let coordinator = Coordinator {
            meta,
            agent_id,
            owns,
            cfg,
            slots: Slots::new(LIMITS),
            results,
            stats,
            topics: TopicsView::new(),
            topics_refreshed: Instant::now(),
        };
        (coordinator, done_rx)
    }

    pub(super) async fn run(
        mut self,
        mut rx: mpsc::Receiver<Msg>,
        mut done_rx: mpsc::Receiver<Done>,
    ) {
        let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_adopt = Instant::now()
            .checked_sub(ADOPT_INTERVAL)
            .unwrap_or_else(Instant::now);
        let mut last_expire = Instant::now();
        let mut last_lag: Option<Instant> = None;
        loop {
            let next_timer = self.slots.next_wake();
            let timer = async {
                match next_timer {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                m = rx.recv() => match m {
                    Some(Msg::Call(c)) => self.on_call(*c),
                    Some(Msg::List(reply)) => {
                        let meta = self.meta.clone();
                        self.results
                            .spawn(async move { Done::Listed(meta.list_groups().await, reply) });
                    }
                    Some(Msg::Learned(topics)) => self.on_learned(topics),
                    Some(Msg::Shutdown) | None => break,
                },
                Some(d) = done_rx.recv() => self.on_done(d),
                _ = timer => self.on_timers(),
                _ = sweep.tick() => {
                    self.sweep();
                    if last_adopt.elapsed() >= ADOPT_INTERVAL {
                        last_adopt = Instant::now();
                        let meta = self.meta.clone();
                        let agent_id = self.agent_id;
                        self.results
                            .spawn(async move { Done::Orphans(meta.orphaned_groups(agent_id).await) });
                    }
                    if let Some(every) = self.cfg.lag_interval {
                        if last_lag.is_none_or(|t| t.elapsed() >= every) {
                            last_lag = Some(Instant::now());
                            self.measure_lag();
                        }
                    }
                    if last_expire.elapsed() >= OFFSETS_RETENTION_CHECK {
                        last_expire = Instant::now();
                        let meta = self.meta.clone();
                        let retention = self.cfg.offsets_retention;
                        tokio::spawn(async move {
                            match meta.expire_groups(retention).await {
                                Ok((0, 0)) => {}
                                Ok((offsets, groups)) => tracing::info!(offsets, groups, "expired committed offsets of empty groups"),
                                Err(e) => tracing::warn!(error = %e, "offset expiry failed"),
                            }
                        });
                    }
                }
            }
        }
        // Shutting down: every waiter learns the group moves on.
        for (_, slot) in self.slots.drain() {
            match slot {
                Slot::Loading(calls) => calls
                    .into_iter()
                    .for_each(|c| c.fail(ErrorCode::NotCoordinator)),
                Slot::Loaded(mut l) => {
                    l.state.group.kill(ErrorCode::NotCoordinator);
                    fail_writes(&mut l.writes, ErrorCode::NotCoordinator);
                }
            }
        }
        rx.close();
        while let Ok(m) = rx.try_recv() {
            if let Msg::Call(c) = m {
                (*c).fail(ErrorCode::NotCoordinator);
            }
        }
    }

    /// Measures the consumer lag of the groups this agent coordinates, in
    /// the background (one query; the loop does not wait for it).
    fn measure_lag(&self) {
        let (meta, owns, stats) = (self.meta.clone(), self.owns.clone(), self.stats.clone());
        tokio::spawn(async move {
            match meta.group_lags(GROUP_LAG_ROWS_MAX, move |g| owns(g)).await {
                Ok((rows, more)) => {
                    if more {
                        tracing::warn!(rows = rows.len(), "consumer lag: more groups and topics than exported; the rest are left out");
                    }
                    *stats.lags.lock().expect("stats lock") = rows;
                }
                Err(e) => tracing::warn!(error = %e, "measuring consumer lag failed"),
            }
        });
    }

    fn on_call(&mut self, call: Call) {
        let group_id = call.group_id().to_owned();
        if !(self.owns)(&group_id) {
            call.fail(ErrorCode::NotCoordinator);
            return;
        }
        match self.slots.admit(&group_id, call) {
            Admit::Loaded(call) => self.apply(&group_id, call),
            Admit::Waiting => {}
            Admit::Full(call) => call.fail(ErrorCode::CoordinatorLoadInProgress),
            Admit::Load => {
                let meta = self.meta.clone();
                let agent_id = self.agent_id;
                self.results.spawn(async move {
                    let r = meta.claim_group(group_id.clone(), agent_id).await;
                    Done::Loaded(group_id, r)
                });
            }
        }
    }

    fn on_timers(&mut self) {
        let now = Instant::now();
        while let Some(group_id) = self.slots.pop_due(now) {
            let Some(l) = self.slots.get_mut(&group_id) else {
                continue;
            };
            let mut fx = Effects::default();
            if let Some(s) = l.state.streams.as_mut() {
                let (gone, changed) = s.on_timer(now, &self.topics);
                fx.expired += gone;
                if changed {
                    fx.stores.push((s.snapshot(), AfterStore::Nothing));
                }
                self.after(&group_id, fx);
                continue;
            }
            if let Some(s) = l.state.share.as_mut() {
                let gone = s.on_timer(now, &self.topics);
                if gone > 0 {
                    fx.expired += gone;
                    fx.stores.push((s.snapshot(), AfterStore::Nothing));
                }
                self.after(&group_id, fx);
                continue;
            }
            match l.state.consumer.as_mut() {
                Some(c) => {
                    let gone = c.on_timer(now, &self.topics);
                    if gone > 0 {
                        fx.expired += gone;
                        fx.stores.push((c.snapshot(), AfterStore::Nothing));
                    }
                }
                None => l.state.group.on_timer(now, &mut fx),
            }
            self.after(&group_id, fx);
        }
    }

    fn on_done(&mut self, done: Done) {
        match done {
            Done::Loaded(group_id, result) => self.on_loaded(group_id, result),
            Done::Wrote(group_id, load_id, wrote) => self.on_wrote(group_id, load_id, wrote),
            Done::Listed(result, reply) => {
                let _ = reply.send(self.listing(result));
            }
            Done::Orphans(Ok(ids)) => {
                for group_id in ids {
                    if !self.slots.contains(&group_id) && (self.owns)(&group_id) {
                        tracing::info!(group = %group_id, "taking over a group whose coordinator is gone");
                        self.on_call(Call::Adopt { group_id });
                    }
                }
            }
            Done::Orphans(Err(e)) => tracing::debug!(error = %e, "orphaned group lookup failed"),
            Done::Topics(names, Ok(found)) => self.on_topics(names, found),
            Done::Topics(_, Err(e)) => {
                tracing::debug!(error = %e, "subscribed topics lookup failed")
            }
        }
    }

    fn on_loaded(
        &mut self,
        group_id: String,
        result: Result<Option<(StoredGroup, i64)>, MetaError>,
    ) {
        let Some(calls) = self.slots.take_waiters(&group_id) else {
            return;
        };
        let now = Instant::now();
        let mut share = None;
        let mut streams = None;
        let ((group, consumer), epoch) = match result {
            Ok(Some((stored, epoch))) => {
                self.stats.groups_loaded.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(group = %group_id, epoch, members = stored.members.len(), "group loaded");
                if GroupType::of(&stored) == GroupType::Streams {
                    streams = Some(StreamsGroup::load(stored, self.cfg.streams.clone(), now));
                    // Its topology is configured once its topics are in view.
                    self.topics_refreshed = now.checked_sub(TOPICS_REFRESH).unwrap_or(now);
                    (
                        (ClassicGroup::new(group_id.clone(), self.cfg.clone()), None),
                        epoch,
                    )
                } else if GroupType::of(&stored) == GroupType::Share {
                    share = Some(ShareGroup::load(stored, self.cfg.share.clone(), now));
                    (
                        (ClassicGroup::new(group_id.clone(), self.cfg.clone()), None),
                        epoch,
                    )
                } else if GroupType::of(&stored) == GroupType::Consumer {
                    let c = ConsumerGroup::load(stored, self.cfg.clone(), now);
                    (
                        (
                            ClassicGroup::new(group_id.clone(), self.cfg.clone()),
                            Some(c),
                        ),
                        epoch,
                    )
                } else {
                    (
                        (ClassicGroup::load(stored, self.cfg.clone(), now), None),
                        epoch,
                    )
                }
            }
            Ok(None) => (
                (ClassicGroup::new(group_id.clone(), self.cfg.clone()), None),
                0,
            ),
            Err(e) => {
                tracing::warn!(group = %group_id, error = %e, "cannot load group");
                calls
                    .into_iter()
                    .for_each(|c| c.fail(ErrorCode::CoordinatorLoadInProgress));
                return;
            }
        };
        self.slots.insert_loaded(
            group_id.clone(),
            epoch,
            Group {
                group,
                consumer,
                share,
                streams,
            },
            now,
        );
        let adopting = calls.iter().all(|c| matches!(c, Call::Adopt { .. }));
        for c in calls {
            if self.slots.get(&group_id).is_some() {
                self.apply(&group_id, c);
            } else {
                // An earlier call found no group and let it go: this one
                // (a JoinGroup, say) starts over.
                self.on_call(c);
            }
        }
        if adopting {
            self.after(&group_id, Effects::default());
        }
    }

    /// Drops a group from memory; its waiting calls get `error`.
    pub(super) fn unload(&mut self, group_id: &str, error: ErrorCode) {
        match self.slots.remove(group_id) {
            Some(Slot::Loaded(mut l)) => {
                // A write in flight answers its own caller when it ends.
                l.state.group.kill(error);
                fail_writes(&mut l.writes, error);
            }
            Some(Slot::Loading(calls)) => calls.into_iter().for_each(|c| c.fail(error)),
            None => {}
        }
    }

    /// New metadata of subscribed topics: consumer groups whose topics
    /// changed get a new target assignment.
    fn on_topics(&mut self, names: Vec<String>, found: Vec<rutomq_meta::TopicRecord>) {
        for n in &names {
            self.topics.remove(n);
        }
        for t in found {
            self.topics.insert(t.name, (t.topic_id, t.partitions));
        }
        let asked: BTreeSet<String> = names.into_iter().collect();
        for (_, l) in self.slots.loaded_mut() {
            if let Some(s) = l.state.streams.as_mut() {
                s.view_refreshed(&asked);
            }
        }
        self.reassign_loaded();
    }

    /// Groups whose topics changed in the view get a new target.
    fn reassign_loaded(&mut self) {
        let ids: Vec<String> = self
            .slots
            .loaded()
            .filter(|(_, l)| !l.state.is_classic())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(l) = self.slots.get_mut(&id) else {
                continue;
            };
            if let Some(s) = l.state.streams.as_mut() {
                let before = (s.group_epoch, s.assignment_epoch);
                s.maybe_assign(&self.topics);
                if (s.group_epoch, s.assignment_epoch) != before {
                    tracing::info!(group = %id, epoch = s.group_epoch, "topology topics changed; streams group assigns again");
                    let mut fx = Effects::default();
                    fx.stores.push((s.snapshot(), AfterStore::Nothing));
                    self.after(&id, fx);
                }
                continue;
            }
            if let Some(s) = l.state.share.as_mut() {
                let before = s.group_epoch;
                s.maybe_assign(&self.topics);
                if s.group_epoch != before {
                    tracing::info!(group = %id, epoch = s.group_epoch, "subscribed topics changed; share group assigns again");
                    let mut fx = Effects::default();
                    fx.stores.push((s.snapshot(), AfterStore::Nothing));
                    self.after(&id, fx);
                }
                continue;
            }
            let c = l.state.consumer.as_mut().expect("filtered");
            let before = c.group_epoch;
            c.maybe_assign(&self.topics);
            if c.group_epoch != before {
                tracing::info!(group = %id, epoch = c.group_epoch, "subscribed topics changed; new target assignment");
                let mut fx = Effects::default();
                fx.stores.push((c.snapshot(), AfterStore::Nothing));
                self.after(&id, fx);
            }
        }
    }

    /// Topics this agent made: into the view, and the groups that wait for
    /// them look again.
    fn on_learned(&mut self, topics: Vec<(String, uuid::Uuid, i32)>) {
        for (name, id, partitions) in topics {
            self.topics.insert(name, (id, partitions));
        }
        self.reassign_loaded();
    }

    /// Re-reads the topics loaded consumer groups subscribe to.
    fn refresh_topics(&mut self) {
        let regex = self
            .slots
            .loaded()
            .any(|(_, l)| l.state.consumer.as_ref().is_some_and(|c| c.has_regex()));
        if regex {
            // Regular expressions match any topic: read them all.
            let known: Vec<String> = self.topics.keys().cloned().collect();
            let meta = self.meta.clone();
            self.results.spawn(async move {
                let r = meta.load_topics(None).await;
                Done::Topics(known, r)
            });
            return;
        }
        let names: BTreeSet<String> = self
            .slots
            .loaded()
            .flat_map(|(_, l)| {
                let mut t = l
                    .state
                    .consumer
                    .as_ref()
                    .map(|c| c.subscribed_topics())
                    .unwrap_or_default();
                if let Some(s) = &l.state.share {
                    t.extend(s.subscribed_topics());
                }
                if let Some(s) = &l.state.streams {
                    t.extend(s.required_topics());
                }
                t
            })
            .collect();
        if names.is_empty() {
            return;
        }
        let names: Vec<String> = names.into_iter().collect();
        let meta = self.meta.clone();
        self.results.spawn(async move {
            let r = meta.load_topics(Some(names.clone())).await;
            Done::Topics(names, r)
        });
    }

    /// Unloads groups this agent no longer coordinates and idle ones.
    fn sweep(&mut self) {
        if self.topics_refreshed.elapsed() >= TOPICS_REFRESH {
            self.topics_refreshed = Instant::now();
            self.refresh_topics();
        }
        let owns = &self.owns;
        let lost = self.slots.sweep(Instant::now(), IDLE_UNLOAD, |id| owns(id));
        for id in lost {
            tracing::info!(group = %id, "the group moved to another agent; dropping it here");
            self.unload(&id, ErrorCode::NotCoordinator);
        }
        self.slots.prune_timers();
    }

    fn listing(
        &self,
        result: Result<Vec<GroupListing>, MetaError>,
    ) -> Result<Vec<Listed>, ErrorCode> {
        let rows = result.map_err(|e| {
            tracing::warn!(error = %e, "cannot list groups");
            ErrorCode::CoordinatorLoadInProgress
        })?;
        let mut out: Vec<Listed> = Vec::with_capacity(rows.len());
        let mut seen = HashSet::new();
        for r in rows {
            if !(self.owns)(&r.group_id) {
                continue;
            }
            seen.insert(r.group_id.clone());
            let loaded = self.slots.get(&r.group_id).map(|l| &l.state);
            let (state, protocol_type) = match loaded {
                Some(g) if g.group.state == State::Dead => continue,
                Some(g) => (g.state_name().to_owned(), g.protocol_type()),
                None => (r.state, r.protocol_type),
            };
            let kind = match loaded {
                Some(g) => g.kind().to_owned(),
                None => r.group_type,
            };
            out.push((r.group_id, protocol_type, state, kind));
        }
        // Groups created here and not stored yet (in a first rebalance).
        for (id, l) in self.slots.loaded() {
            let g = &l.state;
            if !seen.contains(id) && g.group.state != State::Dead && !g.empty() {
                out.push((
                    id.clone(),
                    g.protocol_type(),
                    g.state_name().to_owned(),
                    g.kind().to_owned(),
                ));
            }
        }
        Ok(out)
    }
}
