//! The group coordinator: consumer groups whose state lives in PostgreSQL.
//!
//! Each group is coordinated by one live agent, chosen by rendezvous
//! hashing of the group id over the live agents ([`crate::agent::Agent::
//! coordinator_for`]); the others answer NOT_COORDINATOR. The coordinating
//! agent loads the group from PostgreSQL on first use, which bumps the
//! group's coordinator epoch: an agent that lost the group (its view of the
//! live agents was stale, or it was presumed dead) is fenced on its next
//! write and drops the group.
//!
//! One thread runs every group of the agent: a single loop owns all group
//! state (no locks), applies calls in arrival order, and writes what must be
//! durable to PostgreSQL through the metadata thread, one write at a time
//! per group, so writes land in the order they were decided. Calls that
//! wait (JoinGroup, SyncGroup) hold a oneshot the loop answers later.
//!
//! Durable: the group at the end of each rebalance (members, their
//! subscriptions and assignments), when it becomes empty, and committed
//! offsets. Not durable: heartbeats and a rebalance in progress. An agent
//! taking over a group restarts every member's session timer, so members
//! that died with the previous coordinator are removed after their session
//! timeout, and live ones rejoin.

pub mod classic;
pub mod consumer;
mod stored;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use rutomq_meta::groups::{GroupListing, OffsetCommit, StoredGroup};
use rutomq_meta::{Meta, MetaError};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::error::ErrorCode;
use classic::{AfterStore, ClassicGroup, Effects, State};
use consumer::{ConsumerGroup, HeartbeatArgs, HeartbeatResult, TopicsView};
use stored::GroupType;

/// Calls queued to the coordinator thread at most; senders wait beyond.
pub const GROUP_CALLS_QUEUE_MAX: usize = 4096;
/// Groups held in memory at most; idle empty ones are dropped first.
pub const GROUPS_LOADED_MAX: usize = 100_000;
/// Calls waiting for one group to load at most.
pub const LOAD_WAITERS_MAX: usize = 1024;
/// Writes queued per group at most (offset commits beyond get
/// COORDINATOR_LOAD_IN_PROGRESS, which clients retry).
pub const GROUP_WRITES_QUEUED_MAX: usize = 256;
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
    /// offset.metadata.max.bytes
    pub offset_metadata_bytes_max: usize,
    /// group.consumer.session.timeout.ms (KIP-848 groups)
    pub consumer_session_timeout: Duration,
    /// group.consumer.heartbeat.interval.ms (KIP-848 groups)
    pub consumer_heartbeat_interval: Duration,
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
            consumer_session_timeout: Duration::from_millis(45_000),
            consumer_heartbeat_interval: Duration::from_millis(5_000),
        }
    }
}

pub struct JoinArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

#[derive(Clone, Debug)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug)]
pub struct JoinResult {
    pub error: ErrorCode,
    pub member_id: String,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    /// The members and their metadata, for the leader only.
    pub members: Vec<JoinedMember>,
}

pub struct SyncArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug)]
pub struct SyncResult {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub struct LeaveMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub reason: Option<String>,
}

pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

pub struct GroupDescription {
    pub error: ErrorCode,
    /// False when no such group exists (Kafka describes it as Dead).
    pub exists: bool,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

impl GroupDescription {
    fn error(error: ErrorCode) -> GroupDescription {
        GroupDescription {
            error,
            exists: false,
            state: State::Dead.name(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        }
    }
}

pub struct CommitArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    /// -1: a commit from outside group management.
    pub generation: i32,
    /// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for an unknown group.
    pub group_must_exist: bool,
    /// Each (topic, partition) once.
    pub offsets: Vec<OffsetCommit>,
}

/// A listed group: (group id, protocol type, state, group type).
pub type Listed = (String, String, String, String);

/// The (topic, partition) pairs written by an offset commit.
pub type Written = Result<Vec<(Uuid, i32)>, ErrorCode>;

enum Call {
    Join(JoinArgs, oneshot::Sender<JoinResult>),
    Sync(SyncArgs, oneshot::Sender<SyncResult>),
    Heartbeat {
        group_id: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
        reply: oneshot::Sender<ErrorCode>,
    },
    Leave {
        group_id: String,
        members: Vec<LeaveMember>,
        reply: oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
    },
    Commit(CommitArgs, oneshot::Sender<Written>),
    Describe {
        group_id: String,
        reply: oneshot::Sender<GroupDescription>,
    },
    Delete {
        group_id: String,
        reply: oneshot::Sender<ErrorCode>,
    },
    DeleteOffsets {
        group_id: String,
        /// (topic name, topic id, partition)
        partitions: Vec<(String, Uuid, i32)>,
        reply: oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
    },
    /// KIP-848 heartbeat, with the subscribed topics the handler resolved
    /// (name, id, partitions).
    ConsumerHeartbeat(
        HeartbeatArgs,
        Vec<(String, Uuid, i32)>,
        oneshot::Sender<HeartbeatResult>,
    ),
    ConsumerDescribe {
        group_id: String,
        reply: oneshot::Sender<ConsumerDescription>,
    },
    /// OffsetFetch v9 from a member: is (member, epoch) current?
    ValidateFetch {
        group_id: String,
        member_id: String,
        member_epoch: i32,
        reply: oneshot::Sender<ErrorCode>,
    },
    /// Load the group if this agent coordinates it (orphan adoption).
    Adopt {
        group_id: String,
    },
}

/// ConsumerGroupDescribe's view of a KIP-848 group.
pub struct ConsumerDescription {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<(consumer::Member, consumer::Partitions)>,
}

impl ConsumerDescription {
    fn error(error: ErrorCode, message: Option<String>) -> ConsumerDescription {
        ConsumerDescription {
            error,
            error_message: message,
            state: "Dead",
            group_epoch: -1,
            assignment_epoch: -1,
            assignor: String::new(),
            members: Vec::new(),
        }
    }
}

impl Call {
    fn group_id(&self) -> &str {
        match self {
            Call::Join(a, _) => &a.group_id,
            Call::Sync(a, _) => &a.group_id,
            Call::Commit(a, _) => &a.group_id,
            Call::ConsumerHeartbeat(a, _, _) => &a.group_id,
            Call::ConsumerDescribe { group_id, .. } => group_id,
            Call::ValidateFetch { group_id, .. } => group_id,
            Call::Heartbeat { group_id, .. }
            | Call::Leave { group_id, .. }
            | Call::Describe { group_id, .. }
            | Call::Delete { group_id, .. }
            | Call::DeleteOffsets { group_id, .. }
            | Call::Adopt { group_id } => group_id,
        }
    }

    /// Answers the call with `error` without touching any group.
    fn fail(self, error: ErrorCode) {
        fn answer<T: Failed>(reply: oneshot::Sender<T>, error: ErrorCode) {
            let _ = reply.send(T::failed(error));
        }
        match self {
            Call::Join(a, r) => {
                let _ = r.send(JoinResult::error(error, &a.member_id));
            }
            Call::Sync(_, r) => answer(r, error),
            Call::Heartbeat { reply, .. }
            | Call::Delete { reply, .. }
            | Call::ValidateFetch { reply, .. } => answer(reply, error),
            Call::Leave { reply, .. } | Call::DeleteOffsets { reply, .. } => answer(reply, error),
            Call::Commit(_, r) => answer(r, error),
            Call::Describe { reply, .. } => answer(reply, error),
            Call::ConsumerHeartbeat(_, _, r) => answer(r, error),
            Call::ConsumerDescribe { reply, .. } => answer(reply, error),
            Call::Adopt { .. } => {}
        }
    }
}

/// An answer that carries only an error: the call failed before a group
/// looked at it (the coordinator is gone, or the group moved).
pub trait Failed {
    fn failed(error: ErrorCode) -> Self;
}

impl Failed for ErrorCode {
    fn failed(error: ErrorCode) -> Self {
        error
    }
}

impl<T> Failed for Result<T, ErrorCode> {
    fn failed(error: ErrorCode) -> Self {
        Err(error)
    }
}

impl Failed for SyncResult {
    fn failed(error: ErrorCode) -> Self {
        SyncResult::error(error)
    }
}

impl Failed for GroupDescription {
    fn failed(error: ErrorCode) -> Self {
        GroupDescription::error(error)
    }
}

impl Failed for HeartbeatResult {
    fn failed(error: ErrorCode) -> Self {
        HeartbeatResult::error(error, None)
    }
}

impl Failed for ConsumerDescription {
    fn failed(error: ErrorCode) -> Self {
        ConsumerDescription::error(error, None)
    }
}

enum Msg {
    Call(Box<Call>),
    List(oneshot::Sender<Result<Vec<Listed>, ErrorCode>>),
    Shutdown,
}

/// Counters for `/metrics`.
#[derive(Default, Debug)]
pub struct GroupStats {
    pub rebalances: AtomicU64,
    pub members_expired: AtomicU64,
    pub offset_commits: AtomicU64,
    pub groups_loaded: AtomicU64,
    pub fenced: AtomicU64,
}

/// Whether this agent coordinates a group id (by its current view).
pub type Owns = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Handle to the coordinator thread. Cheap to clone; `Send`.
#[derive(Clone)]
pub struct Groups {
    tx: mpsc::Sender<Msg>,
    pub stats: Arc<GroupStats>,
    pub cfg: GroupsConfig,
}

impl Groups {
    pub fn start(
        meta: Meta,
        agent_id: i32,
        owns: Owns,
        cfg: GroupsConfig,
    ) -> std::io::Result<(Groups, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(GROUP_CALLS_QUEUE_MAX);
        let stats = Arc::new(GroupStats::default());
        let thread_stats = stats.clone();
        let thread_cfg = cfg.clone();
        let join = std::thread::Builder::new()
            .name("groups".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                let (done_tx, done_rx) = mpsc::unbounded_channel();
                let coordinator = Coordinator {
                    meta,
                    agent_id,
                    owns,
                    cfg: thread_cfg,
                    slots: HashMap::new(),
                    timers: BinaryHeap::new(),
                    done_tx,
                    stats: thread_stats,
                    topics: TopicsView::new(),
                    topics_refreshed: Instant::now(),
                    loads: 0,
                };
                let run =
                    std::panic::AssertUnwindSafe(|| rt.block_on(coordinator.run(rx, done_rx)));
                if std::panic::catch_unwind(run).is_err() {
                    // Group state is in PostgreSQL: a restarted agent (or
                    // another one) carries on; limping on without a
                    // coordinator would fail every group call forever.
                    tracing::error!("the group coordinator panicked; aborting the agent");
                    std::process::abort();
                }
            })?;
        Ok((Groups { tx, stats, cfg }, join))
    }

    /// Sends a call and waits for its answer; `None` when the coordinator
    /// is gone.
    async fn try_call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Call) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Msg::Call(Box::new(make(tx)))).await.ok()?;
        rx.await.ok()
    }

    /// Sends a call; COORDINATOR_NOT_AVAILABLE when the coordinator is gone.
    async fn call<T: Failed>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Call) -> T {
        self.try_call(make)
            .await
            .unwrap_or_else(|| T::failed(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn join(&self, args: JoinArgs) -> JoinResult {
        let member_id = args.member_id.clone();
        self.try_call(|r| Call::Join(args, r))
            .await
            .unwrap_or_else(|| JoinResult::error(ErrorCode::CoordinatorNotAvailable, &member_id))
    }

    pub async fn sync(&self, args: SyncArgs) -> SyncResult {
        self.call(|r| Call::Sync(args, r)).await
    }

    pub async fn heartbeat(
        &self,
        group_id: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
    ) -> ErrorCode {
        self.call(|reply| Call::Heartbeat {
            group_id,
            member_id,
            instance_id,
            generation,
            reply,
        })
        .await
    }

    pub async fn leave(
        &self,
        group_id: String,
        members: Vec<LeaveMember>,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        self.call(|reply| Call::Leave {
            group_id,
            members,
            reply,
        })
        .await
    }

    pub async fn commit(&self, args: CommitArgs) -> Written {
        self.call(|r| Call::Commit(args, r)).await
    }

    pub async fn describe(&self, group_id: String) -> GroupDescription {
        self.call(|reply| Call::Describe { group_id, reply }).await
    }

    pub async fn delete(&self, group_id: String) -> ErrorCode {
        self.call(|reply| Call::Delete { group_id, reply }).await
    }

    pub async fn delete_offsets(
        &self,
        group_id: String,
        partitions: Vec<(String, Uuid, i32)>,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        self.call(|reply| Call::DeleteOffsets {
            group_id,
            partitions,
            reply,
        })
        .await
    }

    pub async fn consumer_heartbeat(
        &self,
        args: HeartbeatArgs,
        topics: Vec<(String, Uuid, i32)>,
    ) -> HeartbeatResult {
        self.call(|r| Call::ConsumerHeartbeat(args, topics, r))
            .await
    }

    /// OffsetFetch v9 with a member id: whether that member, at that
    /// epoch, may read the group's offsets.
    pub async fn validate_fetch(
        &self,
        group_id: String,
        member_id: String,
        member_epoch: i32,
    ) -> ErrorCode {
        self.call(|reply| Call::ValidateFetch {
            group_id,
            member_id,
            member_epoch,
            reply,
        })
        .await
    }

    pub async fn consumer_describe(&self, group_id: String) -> ConsumerDescription {
        self.call(|reply| Call::ConsumerDescribe { group_id, reply })
            .await
    }

    /// The groups this agent coordinates.
    pub async fn list(&self) -> Result<Vec<Listed>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::List(tx)).await.is_err() {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        rx.await.unwrap_or(Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// Ends the coordinator: every waiting call gets NOT_COORDINATOR (its
    /// client finds the group's next coordinator).
    /// Call from outside any async runtime: it waits for queue room.
    pub fn shutdown(&self) {
        let _ = self.tx.blocking_send(Msg::Shutdown);
    }
}

// ---- the coordinator loop -----------------------------------------------------

enum Slot {
    Loading(Vec<Call>),
    Ready(Box<Loaded>),
}

struct Loaded {
    /// Which load of the group this is (write results of an earlier load
    /// must not touch it).
    load_id: u64,
    group: ClassicGroup,
    /// Set when the group is a KIP-848 consumer group (`group` is then an
    /// unused empty classic group).
    consumer: Option<ConsumerGroup>,
    /// Coordinator epoch loaded (0: the group was never stored).
    epoch: i64,
    writes: VecDeque<Write>,
    writing: bool,
    /// The wake-up time queued on the timer heap.
    scheduled: Option<Instant>,
    last_used: Instant,
}

impl Loaded {
    /// Nothing in memory that PostgreSQL does not have, and no waiter.
    fn unloadable(&self) -> bool {
        self.empty() && !self.writing && self.writes.is_empty()
    }

    /// No member (of either kind) and nobody waiting.
    fn empty(&self) -> bool {
        match &self.consumer {
            Some(c) => c.is_empty(),
            None => self.group.idle(),
        }
    }

    fn state_name(&self) -> &'static str {
        match &self.consumer {
            Some(c) => c.state(),
            None => self.group.state.name(),
        }
    }

    fn protocol_type(&self) -> String {
        match &self.consumer {
            Some(_) => "consumer".into(),
            None => self.group.protocol_type.clone().unwrap_or_default(),
        }
    }

    fn kind(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else {
            "classic"
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        match &self.consumer {
            Some(c) => c.next_wake(),
            None => self.group.next_wake(),
        }
    }
}

enum Write {
    /// The group's state, and what waits for it to be stored.
    Group(Box<StoredGroup>, Vec<AfterStore>),
    Offsets(Vec<OffsetCommit>, oneshot::Sender<Written>),
    DeleteOffsets(
        Vec<(Uuid, i32)>,
        Vec<ErrorCode>,
        oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
    ),
    Delete(oneshot::Sender<ErrorCode>),
}

enum Done {
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

enum Wrote {
    Group(Vec<AfterStore>, Result<Option<i64>, MetaError>),
    Offsets(
        oneshot::Sender<Written>,
        Result<Option<Vec<(Uuid, i32)>>, MetaError>,
    ),
    DeleteOffsets(
        Vec<ErrorCode>,
        oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
        Result<Option<u64>, MetaError>,
    ),
    Delete(oneshot::Sender<ErrorCode>, Result<bool, MetaError>),
}

struct Coordinator {
    meta: Meta,
    agent_id: i32,
    owns: Owns,
    cfg: GroupsConfig,
    slots: HashMap<String, Slot>,
    timers: BinaryHeap<Reverse<(Instant, String)>>,
    done_tx: mpsc::UnboundedSender<Done>,
    stats: Arc<GroupStats>,
    /// Topics consumer groups subscribe to, refreshed every
    /// `TOPICS_REFRESH` while such groups are loaded.
    topics: TopicsView,
    topics_refreshed: Instant,
    /// Loads so far (each loaded group gets the next number).
    loads: u64,
}

impl Coordinator {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Msg>,
        mut done_rx: mpsc::UnboundedReceiver<Done>,
    ) {
        let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_adopt = Instant::now()
            .checked_sub(ADOPT_INTERVAL)
            .unwrap_or_else(Instant::now);
        let mut last_expire = Instant::now();
        loop {
            let next_timer = self.timers.peek().map(|Reverse((t, _))| *t);
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
                        let done = self.done_tx.clone();
                        tokio::spawn(async move {
                            let _ = done.send(Done::Listed(meta.list_groups().await, reply));
                        });
                    }
                    Some(Msg::Shutdown) | None => break,
                },
                Some(d) = done_rx.recv() => self.on_done(d),
                _ = timer => self.on_timers(),
                _ = sweep.tick() => {
                    self.sweep();
                    if last_adopt.elapsed() >= ADOPT_INTERVAL {
                        last_adopt = Instant::now();
                        let meta = self.meta.clone();
                        let done = self.done_tx.clone();
                        let agent_id = self.agent_id;
                        tokio::spawn(async move {
                            let _ = done.send(Done::Orphans(meta.orphaned_groups(agent_id).await));
                        });
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
                Slot::Ready(mut l) => {
                    l.group.kill(ErrorCode::NotCoordinator);
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

    fn on_call(&mut self, call: Call) {
        let group_id = call.group_id().to_owned();
        if !(self.owns)(&group_id) {
            call.fail(ErrorCode::NotCoordinator);
            return;
        }
        match self.slots.get_mut(&group_id) {
            Some(Slot::Ready(_)) => self.apply(&group_id, call),
            Some(Slot::Loading(waiting)) => {
                if waiting.len() >= LOAD_WAITERS_MAX {
                    call.fail(ErrorCode::CoordinatorLoadInProgress);
                } else {
                    waiting.push(call);
                }
            }
            None => {
                if self.slots.len() >= GROUPS_LOADED_MAX && !self.evict_one() {
                    call.fail(ErrorCode::CoordinatorLoadInProgress);
                    return;
                }
                self.slots
                    .insert(group_id.clone(), Slot::Loading(vec![call]));
                let meta = self.meta.clone();
                let done = self.done_tx.clone();
                let agent_id = self.agent_id;
                tokio::spawn(async move {
                    let r = meta.claim_group(group_id.clone(), agent_id).await;
                    let _ = done.send(Done::Loaded(group_id, r));
                });
            }
        }
    }

    /// Drops one idle group from memory to make room.
    fn evict_one(&mut self) -> bool {
        let victim = self
            .slots
            .iter()
            .filter_map(|(id, s)| match s {
                Slot::Ready(l) if l.unloadable() => Some((l.last_used, id.clone())),
                _ => None,
            })
            .min();
        match victim {
            Some((_, id)) => {
                self.slots.remove(&id);
                true
            }
            None => false,
        }
    }

    /// Applies a call to a loaded group.
    fn apply(&mut self, group_id: &str, call: Call) {
        let now = Instant::now();
        let Some(Slot::Ready(l)) = self.slots.get_mut(group_id) else {
            call.fail(ErrorCode::CoordinatorNotAvailable);
            return;
        };
        l.last_used = now;
        let known = l.epoch > 0 || !l.empty() || l.writing || !l.writes.is_empty();
        let mut fx = Effects::default();
        // A call of the other protocol: an empty group switches protocol
        // (Kafka converts empty groups), a group with members refuses it.
        let classic_call = matches!(
            call,
            Call::Join(..) | Call::Sync(..) | Call::Heartbeat { .. } | Call::Leave { .. }
        );
        if classic_call && l.consumer.is_some() {
            if !l.empty() || !matches!(call, Call::Join(..)) {
                match call {
                    Call::Join(a, r) => {
                        let _ = r.send(JoinResult::error(
                            ErrorCode::InconsistentGroupProtocol,
                            &a.member_id,
                        ));
                    }
                    other => other.fail(ErrorCode::UnknownMemberId),
                }
                return self.after(group_id, fx);
            }
            l.consumer = None;
        }
        if matches!(call, Call::ConsumerHeartbeat(..)) && l.consumer.is_none() {
            if !l.group.idle() {
                if let Call::ConsumerHeartbeat(_, _, r) = call {
                    let _ = r.send(HeartbeatResult::error(
                        ErrorCode::GroupIdNotFound,
                        format!("group {group_id} is a classic group with members"),
                    ));
                }
                return self.after(group_id, fx);
            }
            let mut c = ConsumerGroup::new(group_id.to_owned(), self.cfg.clone());
            c.group_epoch = l.group.generation;
            c.assignment_epoch = l.group.generation;
            l.consumer = Some(c);
        }
        if l.consumer.is_some() {
            self.apply_consumer(group_id, call, known, now);
            return;
        }
        let g = &mut l.group;
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
                        enqueue_offsets(l, args.offsets, reply, &self.stats);
                    }
                }
            }
            Call::Describe { reply, .. } => {
                let d = if known {
                    let (protocol, members) = g.describe();
                    GroupDescription {
                        error: ErrorCode::None,
                        exists: true,
                        state: g.state.name(),
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocol,
                        members,
                    }
                } else {
                    GroupDescription::error(ErrorCode::None)
                };
                let _ = reply.send(d);
            }
            Call::Delete { reply, .. } => {
                if !known || g.state == State::Dead {
                    let _ = reply.send(ErrorCode::GroupIdNotFound);
                } else if !g.is_empty() || g.state != State::Empty {
                    let _ = reply.send(ErrorCode::NonEmptyGroup);
                } else if l.epoch == 0 && !l.writing && l.writes.is_empty() {
                    // Never stored: nothing to delete but the memory.
                    g.kill(ErrorCode::GroupIdNotFound);
                    let _ = reply.send(ErrorCode::None);
                } else {
                    l.writes.push_back(Write::Delete(reply));
                }
            }
            Call::DeleteOffsets {
                partitions, reply, ..
            } => {
                if !known || g.state == State::Dead {
                    let _ = reply.send(Err(ErrorCode::GroupIdNotFound));
                } else if g.state != State::Empty && g.protocol_type.as_deref() != Some("consumer")
                {
                    let _ = reply.send(Err(ErrorCode::NonEmptyGroup));
                } else {
                    let subscribed = if g.state == State::Empty {
                        HashSet::new()
                    } else {
                        g.subscribed_topics().unwrap_or_default()
                    };
                    let mut codes = Vec::with_capacity(partitions.len());
                    let mut deletable = Vec::new();
                    for (topic, id, p) in partitions {
                        if subscribed.contains(&topic) {
                            codes.push(ErrorCode::GroupSubscribedToTopic);
                        } else {
                            codes.push(ErrorCode::None);
                            deletable.push((id, p));
                        }
                    }
                    if l.epoch == 0 {
                        // Never stored: it has no offsets to delete.
                        let _ = reply.send(Ok(codes));
                    } else {
                        l.writes
                            .push_back(Write::DeleteOffsets(deletable, codes, reply));
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
            Call::Adopt { .. } => {}
        }
        self.after(group_id, fx);
    }

    /// Applies a call to a KIP-848 consumer group.
    fn apply_consumer(&mut self, group_id: &str, call: Call, known: bool, now: Instant) {
        let Some(Slot::Ready(l)) = self.slots.get_mut(group_id) else {
            return call.fail(ErrorCode::CoordinatorNotAvailable);
        };
        let mut fx = Effects::default();
        let c = l.consumer.as_mut().expect("a consumer group");
        match call {
            Call::ConsumerHeartbeat(args, resolved, reply) => {
                // Shards' topic caches may be older than this view: they
                // only fill in topics it does not know yet.
                for (name, id, partitions) in resolved {
                    self.topics.entry(name).or_insert((id, partitions));
                }
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
                if changed && result.error == ErrorCode::None {
                    fx.stores.push((
                        c.snapshot(),
                        AfterStore::ConsumerHeartbeat { reply, result },
                    ));
                } else {
                    if changed {
                        fx.stores.push((c.snapshot(), AfterStore::Nothing));
                    }
                    let _ = reply.send(result);
                }
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
                    Ok(()) => enqueue_offsets(l, args.offsets, reply, &self.stats),
                }
            }
            Call::Describe { reply, .. } => {
                let _ = reply.send(GroupDescription {
                    error: ErrorCode::None,
                    exists: true,
                    state: c.state(),
                    protocol_type: "consumer".into(),
                    protocol: c.assignor.clone(),
                    members: c
                        .members
                        .values()
                        .map(|m| MemberDescription {
                            member_id: m.member_id.clone(),
                            instance_id: m.instance_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            metadata: Bytes::new(),
                            assignment: Bytes::new(),
                        })
                        .collect(),
                });
            }
            Call::Delete { reply, .. } => {
                if !c.is_empty() {
                    let _ = reply.send(ErrorCode::NonEmptyGroup);
                } else {
                    l.writes.push_back(Write::Delete(reply));
                }
            }
            Call::DeleteOffsets {
                partitions, reply, ..
            } => {
                let subscribed = c.consumed_topics(&self.topics);
                let mut codes = Vec::with_capacity(partitions.len());
                let mut deletable = Vec::new();
                for (topic, id, p) in partitions {
                    if subscribed.contains(&topic) {
                        codes.push(ErrorCode::GroupSubscribedToTopic);
                    } else {
                        codes.push(ErrorCode::None);
                        deletable.push((id, p));
                    }
                }
                l.writes
                    .push_back(Write::DeleteOffsets(deletable, codes, reply));
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

    /// Queues a group's writes, starts the next, re-arms its timer, and
    /// forgets a group that does not exist.
    fn after(&mut self, group_id: &str, mut fx: Effects) {
        self.stats
            .rebalances
            .fetch_add(fx.rebalances, Ordering::Relaxed);
        self.stats
            .members_expired
            .fetch_add(fx.expired, Ordering::Relaxed);
        let Some(Slot::Ready(l)) = self.slots.get_mut(group_id) else {
            return;
        };
        for (stored, after) in fx.stores.drain(..) {
            queue_store(l, stored, after);
        }
        if l.group.state == State::Dead && !l.writing && l.writes.is_empty() {
            self.slots.remove(group_id);
            return;
        }
        if l.epoch == 0 && l.unloadable() {
            // Asked about, never created: nothing to keep.
            self.slots.remove(group_id);
            return;
        }
        self.start_write(group_id);
        self.schedule(group_id);
    }

    fn schedule(&mut self, group_id: &str) {
        let Some(Slot::Ready(l)) = self.slots.get_mut(group_id) else {
            return;
        };
        if let Some(wake) = l.next_wake() {
            if l.scheduled.is_none_or(|s| wake < s) {
                l.scheduled = Some(wake);
                self.timers.push(Reverse((wake, group_id.to_owned())));
            }
        }
    }

    fn on_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((t, _))) = self.timers.peek() {
            if *t > now {
                break;
            }
            let Reverse((t, group_id)) = self.timers.pop().expect("peeked");
            let Some(Slot::Ready(l)) = self.slots.get_mut(&group_id) else {
                continue;
            };
            if l.scheduled != Some(t) {
                continue; // superseded by an earlier wake-up
            }
            l.scheduled = None;
            let mut fx = Effects::default();
            match l.consumer.as_mut() {
                Some(c) => {
                    let gone = c.on_timer(now, &self.topics);
                    if gone > 0 {
                        fx.expired += gone;
                        fx.stores.push((c.snapshot(), AfterStore::Nothing));
                    }
                }
                None => l.group.on_timer(now, &mut fx),
            }
            self.after(&group_id, fx);
        }
    }

    /// Starts the group's next write if none is running.
    fn start_write(&mut self, group_id: &str) {
        let Some(Slot::Ready(l)) = self.slots.get_mut(group_id) else {
            return;
        };
        if l.writing {
            return;
        }
        let Some(write) = l.writes.pop_front() else {
            return;
        };
        l.writing = true;
        let epoch = l.epoch;
        let load_id = l.load_id;
        let meta = self.meta.clone();
        let done = self.done_tx.clone();
        let agent_id = self.agent_id;
        let id = group_id.to_owned();
        tokio::spawn(async move {
            let wrote = match write {
                Write::Group(stored, afters) => {
                    Wrote::Group(afters, meta.store_group(*stored, epoch, agent_id).await)
                }
                Write::Offsets(offsets, reply) => {
                    Wrote::Offsets(reply, meta.commit_offsets(id.clone(), epoch, offsets).await)
                }
                Write::DeleteOffsets(parts, codes, reply) => Wrote::DeleteOffsets(
                    codes,
                    reply,
                    meta.delete_offsets(id.clone(), epoch, parts).await,
                ),
                Write::Delete(reply) => {
                    Wrote::Delete(reply, meta.delete_group(id.clone(), epoch).await)
                }
            };
            let _ = done.send(Done::Wrote(id, load_id, wrote));
        });
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
                    if !self.slots.contains_key(&group_id) && (self.owns)(&group_id) {
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
        let Some(Slot::Loading(calls)) = self.slots.remove(&group_id) else {
            return;
        };
        let now = Instant::now();
        let ((group, consumer), epoch) = match result {
            Ok(Some((stored, epoch))) => {
                self.stats.groups_loaded.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(group = %group_id, epoch, members = stored.members.len(), "group loaded");
                if GroupType::of(&stored) == GroupType::Consumer {
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
        self.slots.insert(
            group_id.clone(),
            Slot::Ready(Box::new(Loaded {
                load_id: {
                    self.loads += 1;
                    self.loads
                },
                group,
                consumer,
                epoch,
                writes: VecDeque::new(),
                writing: false,
                scheduled: None,
                last_used: now,
            })),
        );
        let adopting = calls.iter().all(|c| matches!(c, Call::Adopt { .. }));
        for c in calls {
            if matches!(self.slots.get(&group_id), Some(Slot::Ready(_))) {
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

    fn on_wrote(&mut self, group_id: String, load_id: u64, wrote: Wrote) {
        let now = Instant::now();
        let mut fenced = false;
        let mut unload = false;
        let mut fx = Effects::default();
        // The result of a write issued by an earlier load of the group (it
        // was unloaded and loaded again meanwhile) only answers its callers.
        let slot = match self.slots.get_mut(&group_id) {
            Some(Slot::Ready(l)) if l.load_id == load_id => {
                l.writing = false;
                Some(l)
            }
            _ => None,
        };
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
                    && slot.as_ref().is_some_and(|l| l.consumer.is_some())
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
                                    l.group.assignments_stored(generation, assignments);
                                } else {
                                    l.group.assignments_failed(generation, code, now, &mut fx);
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
                        l.consumer = None;
                        l.group.kill(ErrorCode::GroupIdNotFound);
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
        let current =
            matches!(self.slots.get(&group_id), Some(Slot::Ready(l)) if l.load_id == load_id);
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

    /// Drops a group from memory; its waiting calls get `error`.
    fn unload(&mut self, group_id: &str, error: ErrorCode) {
        match self.slots.remove(group_id) {
            Some(Slot::Ready(mut l)) => {
                l.group.kill(error);
                fail_writes(&mut l.writes, error);
                if l.writing {
                    // Its write answers its own caller when it ends.
                }
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
        let ids: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Ready(l) if l.consumer.is_some()))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(Slot::Ready(l)) = self.slots.get_mut(&id) else {
                continue;
            };
            let c = l.consumer.as_mut().expect("filtered");
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

    /// Re-reads the topics loaded consumer groups subscribe to.
    fn refresh_topics(&mut self) {
        let regex = self.slots.values().any(
            |s| matches!(s, Slot::Ready(l) if l.consumer.as_ref().is_some_and(|c| c.has_regex())),
        );
        if regex {
            // Regular expressions match any topic: read them all.
            let known: Vec<String> = self.topics.keys().cloned().collect();
            let meta = self.meta.clone();
            let done = self.done_tx.clone();
            tokio::spawn(async move {
                let r = meta.load_topics(None).await;
                let _ = done.send(Done::Topics(known, r));
            });
            return;
        }
        let names: BTreeSet<String> = self
            .slots
            .values()
            .filter_map(|s| match s {
                Slot::Ready(l) => l.consumer.as_ref(),
                _ => None,
            })
            .flat_map(|c| c.subscribed_topics())
            .collect();
        if names.is_empty() {
            return;
        }
        let names: Vec<String> = names.into_iter().collect();
        let meta = self.meta.clone();
        let done = self.done_tx.clone();
        tokio::spawn(async move {
            let r = meta.load_topics(Some(names.clone())).await;
            let _ = done.send(Done::Topics(names, r));
        });
    }

    /// Unloads groups this agent no longer coordinates and idle ones.
    fn sweep(&mut self) {
        if self.topics_refreshed.elapsed() >= TOPICS_REFRESH {
            self.topics_refreshed = Instant::now();
            self.refresh_topics();
        }
        let now = Instant::now();
        let mut lost = Vec::new();
        let mut idle = Vec::new();
        for (id, slot) in &self.slots {
            if let Slot::Ready(l) = slot {
                if !(self.owns)(id) {
                    lost.push(id.clone());
                } else if l.unloadable() && now.duration_since(l.last_used) >= IDLE_UNLOAD {
                    idle.push(id.clone());
                }
            }
        }
        for id in lost {
            tracing::info!(group = %id, "the group moved to another agent; dropping it here");
            self.unload(&id, ErrorCode::NotCoordinator);
        }
        for id in idle {
            self.slots.remove(&id);
        }
        // Timers of unloaded groups are skipped when they fire; keep the
        // heap from holding many of them.
        if self.timers.len() > 4 * self.slots.len() + 1024 {
            let slots = &self.slots;
            self.timers.retain(|Reverse((t, id))| {
                matches!(slots.get(id), Some(Slot::Ready(l)) if l.scheduled == Some(*t))
            });
        }
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
            let (state, protocol_type) = match self.slots.get(&r.group_id) {
                Some(Slot::Ready(l)) if l.group.state == State::Dead => continue,
                Some(Slot::Ready(l)) => (l.state_name().to_owned(), l.protocol_type()),
                _ => (r.state, r.protocol_type),
            };
            let kind = match self.slots.get(&r.group_id) {
                Some(Slot::Ready(l)) => l.kind().to_owned(),
                _ => r.group_type,
            };
            out.push((r.group_id, protocol_type, state, kind));
        }
        // Groups created here and not stored yet (in a first rebalance).
        for (id, slot) in &self.slots {
            if let Slot::Ready(l) = slot {
                if !seen.contains(id) && l.group.state != State::Dead && !l.empty() {
                    out.push((
                        id.clone(),
                        l.protocol_type(),
                        l.state_name().to_owned(),
                        l.kind().to_owned(),
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// Queues a store of the group. A KIP-848 group's state is stored whole,
/// so a store still queued is replaced by the newer one and its waiters
/// join the newer one's: at most one store waits per group, however many
/// heartbeats change it.
fn queue_store(l: &mut Loaded, stored: StoredGroup, after: AfterStore) {
    if GroupType::of(&stored) == GroupType::Consumer {
        for w in l.writes.iter_mut() {
            if let Write::Group(queued, afters) = w {
                if GroupType::of(queued) == GroupType::Consumer {
                    **queued = stored;
                    afters.push(after);
                    return;
                }
            }
        }
    }
    l.writes
        .push_back(Write::Group(Box::new(stored), vec![after]));
}

/// Queues an accepted offset commit, after the group row if the group was
/// never stored (offsets refer to it).
fn enqueue_offsets(
    l: &mut Loaded,
    offsets: Vec<OffsetCommit>,
    reply: oneshot::Sender<Written>,
    stats: &GroupStats,
) {
    if l.writes.len() >= GROUP_WRITES_QUEUED_MAX {
        let _ = reply.send(Err(ErrorCode::CoordinatorLoadInProgress));
        return;
    }
    if l.epoch == 0 && !l.writing && !l.writes.iter().any(|w| matches!(w, Write::Group(..))) {
        let stored = match &l.consumer {
            Some(c) => c.snapshot(),
            None => l.group.snapshot(None),
        };
        l.writes
            .push_back(Write::Group(Box::new(stored), vec![AfterStore::Nothing]));
    }
    stats.offset_commits.fetch_add(1, Ordering::Relaxed);
    l.writes.push_back(Write::Offsets(offsets, reply));
}

fn fail_writes(writes: &mut VecDeque<Write>, error: ErrorCode) {
    for w in writes.drain(..) {
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
                        AfterStore::Assignments { .. } | AfterStore::Nothing => {}
                    }
                }
            }
            Write::Offsets(_, reply) => {
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

/// Rendezvous (highest random weight) hashing: the agent with the highest
/// score for a key coordinates it, so when an agent comes or goes only the
/// keys it wins or held move.
pub fn rendezvous_score(key: &str, agent_id: i32) -> u64 {
    // FNV-1a over the key, then splitmix64 with the agent id: stable across
    // processes and versions (clients are routed by it).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ (agent_id as u32 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_moves_only_the_keys_of_a_removed_agent() {
        let pick = |key: &str, agents: &[i32]| {
            *agents
                .iter()
                .max_by_key(|&&a| (rendezvous_score(key, a), a))
                .unwrap()
        };
        let all = [1, 2, 3, 4];
        let without_3 = [1, 2, 4];
        let mut per_agent = HashMap::new();
        for i in 0..4000 {
            let key = format!("group-{i}");
            let before = pick(&key, &all);
            let after = pick(&key, &without_3);
            *per_agent.entry(before).or_insert(0) += 1;
            if before != 3 {
                assert_eq!(before, after, "{key} moved although its agent stayed");
            }
        }
        for a in all {
            let n = per_agent[&a];
            assert!((800..1200).contains(&n), "agent {a} got {n} of 4000 keys");
        }
    }
}
