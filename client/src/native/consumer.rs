//! The native consumer: classic group membership, fetching and committing,
//! run by one task per consumer. Records reach the caller over a bounded
//! channel, each with an [`Ack`]; the task commits, per partition, only
//! the offsets below the first record not yet acknowledged, periodically,
//! before giving partitions up in a rebalance, and on close. So no commit
//! runs ahead of the caller's processing, across rebalances included.
//!
//! Group protocol: JoinGroup/SyncGroup with the `consumer` protocol type
//! and the `range` assignor (the leader, whichever client it is, assigns);
//! heartbeats on their interval; an eager rebalance (everything is given up,
//! after a commit, and taken again). Fetches go to each partition's leader,
//! one request in flight per broker.

mod kip848;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    BrokerId, ConsumerGroupHeartbeatRequest, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, FetchRequest, FetchResponse, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::sync::{mpsc, oneshot};

use super::conn::Connection;
use super::{bootstrap_addrs, connect, fetch_metadata, Cluster};
pub use crate::acks::ConsumerRecord;
use crate::acks::{Ack, Acks, Tp};
use crate::batch::{decode_batches, Record};
use crate::error::{Error, Result};
use crate::settings::{AutoOffsetReset, GroupProtocol, KafkaConsumerSettings, RebalanceEvent};

const FIND_COORDINATOR_VERSIONS: (i16, i16) = (1, 3);
const JOIN_GROUP_VERSIONS: (i16, i16) = (4, 9);
const SYNC_GROUP_VERSIONS: (i16, i16) = (3, 5);
const HEARTBEAT_VERSIONS: (i16, i16) = (3, 4);
const LEAVE_GROUP_VERSIONS: (i16, i16) = (1, 5);
const OFFSET_FETCH_VERSIONS: (i16, i16) = (1, 7);
const OFFSET_COMMIT_VERSIONS: (i16, i16) = (2, 9);
/// KIP-848 membership; v1 has the member choose its id (KIP-1082).
const CONSUMER_HEARTBEAT_VERSIONS: (i16, i16) = (0, 1);
const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 7);
/// Fetch with sessions (KIP-227, v7+); v13 names topics by id.
const FETCH_VERSIONS: (i16, i16) = (7, 12);
/// Chunks of records handed to the caller but not yet taken.
pub const DELIVERY_QUEUE_MAX: usize = 4;
/// Records per chunk handed to the caller at most.
pub const DELIVERY_CHUNK_MAX: usize = 1024;
/// Fetched bytes waiting for the caller: no new fetch starts at or above
/// this (one full fetch may come on top, `fetch_max_bytes`).
pub const READ_AHEAD_BYTES_MAX: usize = 16 << 20;
/// Records delivered and not yet acknowledged, per partition, at most;
/// fetching the partition pauses past it.
pub const UNACKED_PER_PARTITION_MAX: usize = 100_000;
/// Pause after a failed group or fetch call before the next try.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// A fetch's broker, the connection it opened (if any) and its answer.
/// A fetch's outcome and what it meant for its broker's fetch session.
struct FetchDone {
    node: i32,
    /// The connection it opened, if it had to.
    conn: Option<Connection>,
    /// Every partition wanted from this broker, at the position asked.
    asked: Vec<(Tp, i64)>,
    /// The session epoch and contents once this request is answered.
    session_after: FetchSession,
    result: Result<FetchResponse>,
}

/// A broker's view of this consumer's fetch session (KIP-227): only the
/// partitions whose position changed (and the ones to forget) are sent.
#[derive(Clone, Debug, Default)]
struct FetchSession {
    /// 0: none yet (the next fetch asks for one).
    id: i32,
    epoch: i32,
    /// Partitions in the session with the fetch offset last sent.
    sent: BTreeMap<Tp, i64>,
}

enum Cmd {
    Commit(oneshot::Sender<Result<()>>),
    Close(oneshot::Sender<Result<()>>),
    Pause(Vec<(String, i32)>),
    Resume(Vec<(String, i32)>),
    Seek(String, i32, i64, oneshot::Sender<Result<()>>),
}

/// Handle of a native consumer.
pub struct NativeConsumer {
    records: mpsc::Receiver<Result<Vec<(ConsumerRecord, Ack)>>>,
    /// The chunk being handed out.
    chunk: std::collections::VecDeque<(ConsumerRecord, Ack)>,
    cmds: mpsc::Sender<Cmd>,
    assignment: Arc<Mutex<Vec<(String, i32)>>>,
}

impl NativeConsumer {
    /// Joins `settings.group_id` subscribed to `topics` and starts
    /// fetching (on the current tokio runtime).
    pub async fn start(
        settings: KafkaConsumerSettings,
        topics: Vec<String>,
    ) -> Result<NativeConsumer> {
        settings.validate()?;
        settings.security.validate()?;
        if topics.is_empty() {
            return Err(Error::Config("subscribe to at least one topic".into()));
        }
        let s = Arc::new(settings);
        let mut task = Task::new(s.clone(), topics)?;
        task.bootstrap().await?;
        let (tx, records) = mpsc::channel(DELIVERY_QUEUE_MAX);
        let (cmds, cmd_rx) = mpsc::channel(16);
        let assignment = task.assignment_view.clone();
        tokio::spawn(task.run(tx, cmd_rx));
        Ok(NativeConsumer {
            records,
            chunk: VecDeque::new(),
            cmds,
            assignment,
        })
    }

    /// The next record, or None once the consumer is closed.
    pub async fn next(&mut self) -> Option<Result<(ConsumerRecord, Ack)>> {
        loop {
            if let Some(r) = self.chunk.pop_front() {
                return Some(Ok(r));
            }
            match self.records.recv().await? {
                Ok(chunk) => self.chunk = chunk.into(),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.assignment.lock().expect("assignment lock").clone()
    }

    /// Stops fetching these partitions (records of them not handed out yet
    /// are fetched again after `resume`).
    pub async fn pause(&self, partitions: &[(&str, i32)]) -> Result<()> {
        let tps = partitions
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .collect();
        self.cmds
            .send(Cmd::Pause(tps))
            .await
            .map_err(|_| Error::Closed)
    }

    pub async fn resume(&self, partitions: &[(&str, i32)]) -> Result<()> {
        let tps = partitions
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .collect();
        self.cmds
            .send(Cmd::Resume(tps))
            .await
            .map_err(|_| Error::Closed)
    }

    /// The next record of the partition is the one at `offset`.
    pub async fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.chunk
            .retain(|(r, _)| !(r.topic == topic && r.partition == partition));
        let (tx, rx) = oneshot::channel();
        self.cmds
            .send(Cmd::Seek(topic.to_owned(), partition, offset, tx))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Commits the acknowledged offsets now.
    pub async fn commit(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.cmds
            .send(Cmd::Commit(tx))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Commits the acknowledged offsets and leaves the group.
    pub async fn close(self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.cmds
            .send(Cmd::Close(tx))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }
}

struct Member {
    member_id: String,
    /// The classic generation, or the KIP-848 member epoch.
    generation_id: i32,
    coordinator: Connection,
    protocol: Protocol,
}

/// The group protocol a membership speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Classic,
    /// KIP-848 (ConsumerGroupHeartbeat at this version).
    Consumer(i16),
}

struct Task {
    s: Arc<KafkaConsumerSettings>,
    topics: Vec<String>,
    bootstrap: Vec<String>,
    cluster: Cluster,
    conns: HashMap<i32, Connection>,
    member_id: String,
    member: Option<Member>,
    /// Fetch position per assigned partition.
    positions: BTreeMap<Tp, i64>,
    acks: Arc<Mutex<Acks>>,
    assignment_view: Arc<Mutex<Vec<(String, i32)>>>,
    /// Records fetched, waiting for room in the delivery channel.
    ready: VecDeque<(ConsumerRecord, Tp)>,
    /// Key and value bytes in `ready`.
    ready_bytes: usize,
    fetches: FuturesUnordered<BoxFuture<'static, FetchDone>>,
    /// Fetch session per broker.
    sessions: HashMap<i32, FetchSession>,
    fetching: std::collections::HashSet<i32>,
    /// Partitions not fetched until resumed.
    paused: std::collections::HashSet<Tp>,
    next_heartbeat: Instant,
    /// The classic protocol's `heartbeat_interval`, or the one the KIP-848
    /// coordinator asks for.
    heartbeat_every: Duration,
    /// A KIP-848 assignment whose topic ids are not all known yet.
    pending_target: Option<Vec<(uuid::Uuid, Vec<i32>)>>,
    next_commit: Instant,
    names: HashMap<String, Arc<str>>,
}

impl Task {
    fn new(s: Arc<KafkaConsumerSettings>, topics: Vec<String>) -> Result<Task> {
        Ok(Task {
            bootstrap: bootstrap_addrs(&s.bootstrap_servers)?,
            next_heartbeat: Instant::now(),
            heartbeat_every: s.heartbeat_interval,
            pending_target: None,
            next_commit: Instant::now() + s.auto_commit_interval,
            s,
            topics,
            cluster: Cluster::default(),
            conns: HashMap::new(),
            member_id: String::new(),
            member: None,
            positions: BTreeMap::new(),
            acks: Arc::default(),
            assignment_view: Arc::default(),
            ready: VecDeque::new(),
            ready_bytes: 0,
            fetches: FuturesUnordered::new(),
            sessions: HashMap::new(),
            fetching: Default::default(),
            paused: Default::default(),
            names: HashMap::new(),
        })
    }

    fn name(&mut self, t: &str) -> Arc<str> {
        self.names
            .entry(t.to_owned())
            .or_insert_with(|| Arc::from(t))
            .clone()
    }

    async fn any_conn(&mut self) -> Result<Connection> {
        if let Some(c) = self.conns.values().find(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let mut last = Error::Closed;
        for addr in self.bootstrap.clone() {
            match connect(
                &addr,
                &self.s.security,
                &self.s.client_id,
                self.s.request_timeout,
            )
            .await
            {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn broker(&mut self, node: i32) -> Result<Connection> {
        if let Some(c) = self.conns.get(&node).filter(|c| c.is_alive()) {
            return Ok(c.clone());
        }
        let addr = self
            .cluster
            .brokers
            .get(&node)
            .cloned()
            .ok_or_else(|| Error::Protocol(format!("no address for broker {node}")))?;
        let c = connect(
            &addr,
            &self.s.security,
            &self.s.client_id,
            self.s.request_timeout,
        )
        .await?;
        self.conns.insert(node, c.clone());
        Ok(c)
    }

    /// Reads the subscribed topics' metadata (fails `start` when no broker
    /// answers).
    async fn bootstrap(&mut self) -> Result<()> {
        let conn = self.any_conn().await?;
        let resp = fetch_metadata(&conn, &self.topics, false).await?;
        self.cluster.apply(resp);
        Ok(())
    }

    async fn run(
        mut self,
        tx: mpsc::Sender<Result<Vec<(ConsumerRecord, Ack)>>>,
        mut cmds: mpsc::Receiver<Cmd>,
    ) {
        loop {
            if self.member.is_none() {
                match self.join().await {
                    Ok(()) => {}
                    Err(e) if e.is_retriable() || is_group_retry(&e) => {
                        tracing::debug!(error = %e, "joining the group; trying again");
                        tokio::time::sleep(RETRY_PAUSE).await;
                        continue;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                }
            }
            self.start_fetches();
            let wake = self.next_heartbeat.min(self.next_commit);
            let has_ready = !self.ready.is_empty();
            tokio::select! {
                permit = tx.reserve(), if has_ready => {
                    let Ok(permit) = permit else { return self.leave().await };
                                        permit.send(Ok(self.take_chunk()));
                }
                                                                Some(done) = self.fetches.next(), if !self.fetches.is_empty() => {
                    self.fetching.remove(&done.node);
                    if let Some(c) = done.conn {
                        self.conns.insert(done.node, c);
                    }
                    let result = self.settle_session(done.node, done.session_after, done.result);
                    self.on_fetch(done.node, done.asked, result).await;
                }
                cmd = cmds.recv() => match cmd {
                                        Some(Cmd::Commit(reply)) => { let _ = reply.send(self.commit().await); }
                    Some(Cmd::Pause(tps)) => self.pause(tps),
                    Some(Cmd::Resume(tps)) => {
                        for (t, p) in tps {
                            let tp = (self.name(&t), p);
                            self.paused.remove(&tp);
                        }
                    }
                    Some(Cmd::Seek(t, p, offset, reply)) => {
                        let tp = (self.name(&t), p);
                        let _ = reply.send(self.seek(tp, offset));
                    }
                    Some(Cmd::Close(reply)) => {
                        let r = self.commit().await;
                        self.leave().await;
                        let _ = reply.send(r);
                        return;
                    }
                    None => return self.leave().await,
                },
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
            let now = Instant::now();
            if now >= self.next_commit {
                self.next_commit = now + self.s.auto_commit_interval;
                if let Err(e) = self.commit().await {
                    tracing::debug!(error = %e, "periodic commit failed");
                }
            }
            if now >= self.next_heartbeat {
                self.heartbeat().await;
            }
        }
    }

    /// Up to [`DELIVERY_CHUNK_MAX`] ready records with their Acks; their
    /// partitions' tracking notes them as delivered.
    fn take_chunk(&mut self) -> Vec<(ConsumerRecord, Ack)> {
        let n = self.ready.len().min(DELIVERY_CHUNK_MAX);
        let mut out = Vec::with_capacity(n);
        let mut a = self.acks.lock().expect("acks lock");
        for (rec, tp) in self.ready.drain(..n) {
            self.ready_bytes = self.ready_bytes.saturating_sub(
                rec.key.as_ref().map_or(0, Bytes::len) + rec.value.as_ref().map_or(0, Bytes::len),
            );
            let (epoch, _) = a.deliver(&tp, rec.offset);
            let ack = Ack {
                acks: self.acks.clone(),
                tp,
                offset: rec.offset,
                epoch,
            };
            out.push((rec, ack));
        }
        out
    }

    async fn coordinator(&mut self) -> Result<Connection> {
        let conn = self.any_conn().await?;
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(self.s.group_id.clone()))
            .with_key_type(0);
        let resp = conn.call(&req, FIND_COORDINATOR_VERSIONS).await?;
        if resp.error_code != 0 {
            return Err(Error::kafka(resp.error_code, "FindCoordinator"));
        }
        let addr = super::host_port(resp.host.as_str(), resp.port);
        self.cluster.brokers.insert(resp.node_id.0, addr);
        self.broker(resp.node_id.0).await
    }

    /// Joins (or rejoins) the group over the protocol the settings and
    /// the coordinator agree on.
    async fn join(&mut self) -> Result<()> {
        let coordinator = self.coordinator().await?;
        let offered =
            coordinator.version::<ConsumerGroupHeartbeatRequest>(CONSUMER_HEARTBEAT_VERSIONS);
        match (self.s.group_protocol, offered) {
            (GroupProtocol::Classic, _) | (GroupProtocol::Auto, Err(_)) => {
                self.join_classic(coordinator).await
            }
            (GroupProtocol::Consumer, Err(e)) => Err(Error::Unsupported(format!(
                "group protocol consumer (KIP-848): {e}; use GroupProtocol::Classic"
            ))),
            (_, Ok(version)) => self.join_consumer(coordinator, version).await,
        }
    }

    /// Classic membership: joins, assigns as leader, syncs, and sets up the
    /// assigned partitions' positions.
    async fn join_classic(&mut self, coordinator: Connection) -> Result<()> {
        let mut sub = BytesMut::new();
        sub.extend_from_slice(&0i16.to_be_bytes());
        ConsumerProtocolSubscription::default()
            .with_topics(
                self.topics
                    .iter()
                    .map(|t| StrBytes::from_string(t.clone()))
                    .collect(),
            )
            .encode(&mut sub, 0)
            .map_err(Error::codec)?;
        let group = GroupId(StrBytes::from_string(self.s.group_id.clone()));
        let mut join = JoinGroupRequest::default()
            .with_group_id(group.clone())
            .with_session_timeout_ms(self.s.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(self.s.rebalance_timeout.as_millis() as i32)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(sub.freeze())]);
        let joined = loop {
            let resp = coordinator.call(&join, JOIN_GROUP_VERSIONS).await?;
            match resp.error_code {
                0 => break resp,
                // KIP-394: the first join learns its member id.
                79 => {
                    self.member_id = resp.member_id.to_string();
                    join = join.with_member_id(resp.member_id.clone());
                }
                25 => {
                    self.member_id.clear();
                    join = join.with_member_id(StrBytes::default());
                }
                code => return Err(Error::kafka(code, "JoinGroup")),
            }
        };
        self.member_id = joined.member_id.to_string();
        let leader = joined.leader == joined.member_id;
        let assignments = if leader {
            self.assign(&joined.members).await?
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(group)
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone())
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(joined.protocol_name.clone())
            .with_assignments(assignments);
        let synced = coordinator.call(&sync, SYNC_GROUP_VERSIONS).await?;
        if synced.error_code != 0 {
            return Err(Error::kafka(synced.error_code, "SyncGroup"));
        }
        let mut assigned: Vec<Tp> = Vec::new();
        if synced.assignment.len() >= 2 {
            let mut b = synced.assignment.clone();
            let version = i16::from_be_bytes([b[0], b[1]]);
            let _ = bytes::Buf::get_i16(&mut b);
            let a = ConsumerProtocolAssignment::decode(&mut b, version.clamp(0, 3))
                .map_err(Error::codec)?;
            for t in a.assigned_partitions {
                let name = self.name(t.topic.0.as_str());
                assigned.extend(t.partitions.iter().map(|p| (name.clone(), *p)));
            }
        }
        self.member = Some(Member {
            member_id: self.member_id.clone(),
            generation_id: joined.generation_id,
            coordinator,
            protocol: Protocol::Classic,
        });
        self.heartbeat_every = self.s.heartbeat_interval;
        self.next_heartbeat = Instant::now() + self.heartbeat_every;
        self.take_assignment(assigned).await
    }

    /// The range assignor: per topic, partitions split in member-id order,
    /// the first members taking one more when they do not divide evenly.
    async fn assign(
        &mut self,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let mut subs: Vec<(String, Vec<String>)> = Vec::new();
        for m in members {
            let mut b = m.metadata.clone();
            if b.len() < 2 {
                return Err(Error::Protocol("a member's subscription is empty".into()));
            }
            let version = i16::from_be_bytes([b[0], b[1]]);
            let _ = bytes::Buf::get_i16(&mut b);
            let sub = ConsumerProtocolSubscription::decode(&mut b, version.clamp(0, 3))
                .map_err(Error::codec)?;
            subs.push((
                m.member_id.to_string(),
                sub.topics.iter().map(|t| t.to_string()).collect(),
            ));
        }
        subs.sort();
        let mut all: Vec<String> = subs.iter().flat_map(|s| s.1.iter().cloned()).collect();
        all.sort();
        all.dedup();
        let conn = self.any_conn().await?;
        let resp = fetch_metadata(&conn, &all, false).await?;
        self.cluster.apply(resp);
        let mut out: BTreeMap<String, Vec<AssignedTp>> = BTreeMap::new();
        for topic in &all {
            let n = self
                .cluster
                .topics
                .get(topic)
                .map_or(0, |t| t.leaders.len() as i32);
            let takers: Vec<&String> = subs
                .iter()
                .filter(|s| s.1.contains(topic))
                .map(|s| &s.0)
                .collect();
            if takers.is_empty() || n == 0 {
                continue;
            }
            let per = n / takers.len() as i32;
            let extra = n % takers.len() as i32;
            let mut next = 0;
            for (i, m) in takers.iter().enumerate() {
                let count = per + i32::from((i as i32) < extra);
                if count > 0 {
                    out.entry((*m).clone()).or_default().push(
                        AssignedTp::default()
                            .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                            .with_partitions((next..next + count).collect()),
                    );
                }
                next += count;
            }
        }
        let mut assignments = Vec::new();
        for (m, _) in &subs {
            let mut b = BytesMut::new();
            b.extend_from_slice(&0i16.to_be_bytes());
            ConsumerProtocolAssignment::default()
                .with_assigned_partitions(out.remove(m).unwrap_or_default())
                .encode(&mut b, 0)
                .map_err(Error::codec)?;
            assignments.push(
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(m.clone()))
                    .with_assignment(b.freeze()),
            );
        }
        Ok(assignments)
    }

    /// Starts consuming `assigned` from the committed offsets (or the
    /// reset policy where none is committed).
    async fn take_assignment(&mut self, assigned: Vec<Tp>) -> Result<()> {
        let committed = self.committed(&assigned).await?;
        let mut missing: Vec<Tp> = Vec::new();
        self.positions.clear();
        for tp in &assigned {
            match committed.get(tp) {
                Some(&o) if o >= 0 => {
                    self.positions.insert(tp.clone(), o);
                }
                _ => missing.push(tp.clone()),
            }
        }
        for (tp, o) in self.reset_offsets(&missing).await? {
            self.positions.insert(tp, o);
        }
        {
            let mut a = self.acks.lock().expect("acks lock");
            a.partitions.clear();
            for (tp, &o) in &self.positions {
                a.take(tp.clone(), o);
            }
        }
        *self.assignment_view.lock().expect("assignment lock") = plain(assigned.iter());
        self.s
            .tell(RebalanceEvent::Assigned(plain(assigned.iter())));
        tracing::debug!(partitions = assigned.len(), "assignment taken");
        Ok(())
    }

    async fn committed(&mut self, tps: &[Tp]) -> Result<HashMap<Tp, i64>> {
        if tps.is_empty() {
            return Ok(HashMap::new());
        }
        let member = self.member.as_ref().expect("joined");
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in tps {
            by_topic.entry(&tp.0).or_default().push(tp.1);
        }
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.s.group_id.clone())))
            .with_topics(Some(
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.to_string())))
                            .with_partition_indexes(ps.clone())
                    })
                    .collect(),
            ));
        let resp = member.coordinator.call(&req, OFFSET_FETCH_VERSIONS).await?;
        if resp.error_code != 0 {
            return Err(Error::kafka(resp.error_code, "OffsetFetch"));
        }
        let mut out = HashMap::new();
        for t in resp.topics {
            let name = self.name(t.name.0.as_str());
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(Error::kafka(
                        p.error_code,
                        format!("OffsetFetch {name}-{}", p.partition_index),
                    ));
                }
                out.insert((name.clone(), p.partition_index), p.committed_offset);
            }
        }
        Ok(out)
    }

    /// The reset policy's offsets (ListOffsets to each leader).
    async fn reset_offsets(&mut self, tps: &[Tp]) -> Result<Vec<(Tp, i64)>> {
        if tps.is_empty() {
            return Ok(Vec::new());
        }
        let timestamp = match self.s.auto_offset_reset {
            AutoOffsetReset::Earliest => -2,
            AutoOffsetReset::Latest => -1,
        };
        let mut by_leader: BTreeMap<i32, BTreeMap<Arc<str>, Vec<i32>>> = BTreeMap::new();
        for tp in tps {
            let leader = self.leader(tp);
            if leader < 0 {
                return Err(Error::kafka(5, format!("no leader for {}-{}", tp.0, tp.1)));
            }
            by_leader
                .entry(leader)
                .or_default()
                .entry(tp.0.clone())
                .or_default()
                .push(tp.1);
        }
        let mut out = Vec::new();
        for (node, topics) in by_leader {
            let conn = self.broker(node).await?;
            let req = super::list_offsets_request(
                topics.iter().map(|(t, ps)| (&**t, ps.as_slice())),
                timestamp,
            );
            let resp = conn.call(&req, LIST_OFFSETS_VERSIONS).await?;
            for t in resp.topics {
                let name = self.name(t.name.0.as_str());
                for p in t.partitions {
                    if p.error_code != 0 {
                        return Err(Error::kafka(
                            p.error_code,
                            format!("ListOffsets {name}-{}", p.partition_index),
                        ));
                    }
                    out.push(((name.clone(), p.partition_index), p.offset));
                }
            }
        }
        Ok(out)
    }

    /// Stops fetching `tps`; records of them fetched but not handed out
    /// yet are dropped and fetched again after `resume`.
    fn pause(&mut self, tps: Vec<(String, i32)>) {
        for (t, p) in tps {
            let tp = (self.name(&t), p);
            if let Some(first) = self.ready.iter().find(|r| r.1 == tp).map(|r| r.0.offset) {
                self.drop_ready(&tp);
                self.positions.insert(tp.clone(), first);
            }
            self.paused.insert(tp);
        }
    }

    /// The next record of `tp` handed out will be the one at `offset`.
    /// Commits still only move forward, behind acknowledged work.
    fn seek(&mut self, tp: Tp, offset: i64) -> Result<()> {
        if !self.positions.contains_key(&tp) {
            return Err(Error::Config(format!(
                "{}-{} is not assigned to this member",
                tp.0, tp.1
            )));
        }
        if offset < 0 {
            return Err(Error::Config(format!("seek to offset {offset}")));
        }
        self.drop_ready(&tp);
        self.positions.insert(tp.clone(), offset);
        self.acks.lock().expect("acks lock").seek(&tp, offset);
        Ok(())
    }

    fn drop_ready(&mut self, tp: &Tp) {
        let mut freed = 0;
        self.ready.retain(|(r, t)| {
            let keep = t != tp;
            if !keep {
                freed +=
                    r.key.as_ref().map_or(0, Bytes::len) + r.value.as_ref().map_or(0, Bytes::len);
            }
            keep
        });
        self.ready_bytes = self.ready_bytes.saturating_sub(freed);
    }

    fn leader(&self, tp: &Tp) -> i32 {
        self.cluster
            .topics
            .get(&*tp.0)
            .and_then(|t| t.leaders.get(tp.1 as usize).copied())
            .unwrap_or(-1)
    }

    /// One Fetch per leader with partitions to fetch and none in flight.
    fn start_fetches(&mut self) {
        if self.ready_bytes >= READ_AHEAD_BYTES_MAX {
            return; // the caller is behind: fetch no more meanwhile
        }
        let acks = self.acks.lock().expect("acks lock");
        let mut by_leader: BTreeMap<i32, Vec<(Tp, i64)>> = BTreeMap::new();
        for (tp, &pos) in &self.positions {
            if self.paused.contains(tp) {
                continue;
            }
            let unacked = acks.unacked(tp);
            if unacked >= UNACKED_PER_PARTITION_MAX {
                continue;
            }
            let leader = self.leader(tp);
            if leader >= 0 && !self.fetching.contains(&leader) {
                by_leader.entry(leader).or_default().push((tp.clone(), pos));
            }
        }
        drop(acks);
        for (node, parts) in by_leader {
            let conn = self.conns.get(&node).filter(|c| c.is_alive()).cloned();
            let addr = self.cluster.brokers.get(&node).cloned();
            let session = self.sessions.entry(node).or_default().clone();
            // A new session sends everything; an open one only what moved,
            // and forgets what is no longer wanted.
            let changed: Vec<&(Tp, i64)> = if session.id == 0 {
                parts.iter().collect()
            } else {
                parts
                    .iter()
                    .filter(|(tp, pos)| session.sent.get(tp) != Some(pos))
                    .collect()
            };
            let mut topics: Vec<FetchTopic> = Vec::new();
            for (tp, pos) in changed.iter().copied() {
                let fp = FetchPartition::default()
                    .with_partition(tp.1)
                    .with_fetch_offset(*pos)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(self.s.max_partition_fetch_bytes as i32);
                match topics.iter_mut().find(|t| t.topic.0.as_str() == &*tp.0) {
                    Some(t) => t.partitions.push(fp),
                    None => topics.push(
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(tp.0.to_string())))
                            .with_partitions(vec![fp]),
                    ),
                }
            }
            let mut forgotten: Vec<ForgottenTopic> = Vec::new();
            if session.id != 0 {
                for tp in session
                    .sent
                    .keys()
                    .filter(|tp| !parts.iter().any(|(w, _)| w == *tp))
                {
                    match forgotten.iter_mut().find(|t| t.topic.0.as_str() == &*tp.0) {
                        Some(t) => t.partitions.push(tp.1),
                        None => forgotten.push(
                            ForgottenTopic::default()
                                .with_topic(TopicName(StrBytes::from_string(tp.0.to_string())))
                                .with_partitions(vec![tp.1]),
                        ),
                    }
                }
            }
            let session_after = FetchSession {
                id: session.id,
                epoch: if session.id == 0 {
                    1
                } else {
                    next_epoch(session.epoch)
                },
                sent: parts.iter().cloned().collect(),
            };
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(self.s.fetch_max_wait.as_millis() as i32)
                .with_min_bytes(1)
                .with_max_bytes(self.s.fetch_max_bytes as i32)
                .with_session_id(session.id)
                .with_session_epoch(if session.id == 0 { 0 } else { session.epoch })
                .with_topics(topics)
                .with_forgotten_topics_data(forgotten);
            self.fetching.insert(node);
            let s = self.s.clone();
            let asked = parts.clone();
            self.fetches.push(Box::pin(async move {
                // A broker not connected yet is connected here, so the task
                // goes on (heartbeats, deliveries) meanwhile.
                let (conn, fresh) = match conn {
                    Some(c) => (c, false),
                    None => {
                        let Some(a) = addr else {
                            return FetchDone {
                                node,
                                conn: None,
                                asked,
                                session_after,
                                result: Err(Error::Protocol(format!(
                                    "no address for broker {node}"
                                ))),
                            };
                        };
                        match connect(&a, &s.security, &s.client_id, s.request_timeout).await {
                            Ok(c) => (c, true),
                            Err(e) => {
                                return FetchDone {
                                    node,
                                    conn: None,
                                    asked,
                                    session_after,
                                    result: Err(e),
                                }
                            }
                        }
                    }
                };
                let r = conn.call(&req, FETCH_VERSIONS).await;
                FetchDone {
                    node,
                    conn: fresh.then_some(conn),
                    asked,
                    session_after,
                    result: r,
                }
            }));
        }
    }

    /// Keeps the broker's session in step with an answered fetch: a new
    /// session takes the id the broker gave; a session error or a failed
    /// request starts over with a full fetch.
    fn settle_session(
        &mut self,
        node: i32,
        mut after: FetchSession,
        result: Result<FetchResponse>,
    ) -> Result<FetchResponse> {
        match &result {
            Ok(r) if r.error_code == 0 => {
                if after.id == 0 {
                    after.id = r.session_id; // 0: the broker keeps none
                }
                if after.id == 0 {
                    after.sent.clear();
                }
                self.sessions.insert(node, after);
            }
            _ => {
                self.sessions.remove(&node);
            }
        }
        match result {
            // FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH: the
            // next fetch opens a new session.
            Ok(r) if matches!(r.error_code, 70 | 71) => Ok(FetchResponse::default()),
            Ok(r) if r.error_code != 0 => Err(Error::kafka(r.error_code, "Fetch")),
            other => other,
        }
    }

    async fn on_fetch(&mut self, node: i32, asked: Vec<(Tp, i64)>, result: Result<FetchResponse>) {
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(node, error = %e, "fetch failed");
                self.conns.remove(&node);
                tokio::time::sleep(RETRY_PAUSE).await;
                self.refresh_metadata().await;
                return;
            }
        };
        let mut refresh = false;
        for t in resp.responses {
            let name = self.name(t.topic.0.as_str());
            for p in t.partitions {
                let tp = (name.clone(), p.partition_index);
                let Some(&pos) = self.positions.get(&tp) else {
                    continue; // not ours any more
                };
                // Moved by a seek or a pause since it was asked: stale.
                if !asked.iter().any(|(a, o)| *a == tp && *o == pos) || self.paused.contains(&tp) {
                    continue;
                }
                match p.error_code {
                    0 => {}
                    // Moved, or the position fell out of the log.
                    1 => {
                        if let Ok(v) = self.reset_offsets(std::slice::from_ref(&tp)).await {
                            for (tp, o) in v {
                                self.positions.insert(tp, o);
                            }
                        }
                        continue;
                    }
                    _ => {
                        refresh = true;
                        continue;
                    }
                }
                let mut recs: Vec<Record> = Vec::new();
                match decode_batches(p.records.unwrap_or_default(), pos, &mut recs) {
                    Ok(Some(next)) => {
                        self.positions.insert(tp.clone(), next.max(pos));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(topic = %tp.0, partition = tp.1, error = %e, "undecodable fetch data");
                        continue;
                    }
                }
                for r in recs {
                    self.ready_bytes += r.key.as_ref().map_or(0, Bytes::len)
                        + r.value.as_ref().map_or(0, Bytes::len);
                    self.ready.push_back((
                        ConsumerRecord {
                            topic: tp.0.to_string(),
                            partition: tp.1,
                            offset: r.offset,
                            timestamp_ms: r.timestamp_ms,
                            key: r.key,
                            value: r.value,
                            headers: r.headers,
                        },
                        tp.clone(),
                    ));
                }
            }
        }
        if refresh {
            self.refresh_metadata().await;
        }
    }

    async fn refresh_metadata(&mut self) {
        if let Ok(conn) = self.any_conn().await {
            if let Ok(resp) = fetch_metadata(&conn, &self.topics, false).await {
                self.cluster.apply(resp);
            }
        }
    }

    async fn heartbeat(&mut self) {
        let Some(m) = &self.member else { return };
        if let Protocol::Consumer(version) = m.protocol {
            return self.heartbeat_consumer(version).await;
        }
        self.next_heartbeat = Instant::now() + self.heartbeat_every;
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.s.group_id.clone())))
            .with_generation_id(m.generation_id)
            .with_member_id(StrBytes::from_string(m.member_id.clone()));
        let code = match m.coordinator.call(&req, HEARTBEAT_VERSIONS).await {
            Ok(r) => r.error_code,
            Err(e) => {
                tracing::debug!(error = %e, "heartbeat failed; finding the coordinator again");
                self.give_up_assignment(false).await;
                return;
            }
        };
        match code {
            0 => {}
            // A rebalance: commit what is acknowledged, then rejoin.
            27 => self.give_up_assignment(true).await,
            // Fenced out of the group: the partitions are someone else's.
            22 | 25 => {
                if code == 25 {
                    self.member_id.clear();
                }
                self.give_up_assignment(false).await;
            }
            _ => self.give_up_assignment(false).await,
        }
    }

    /// Leaves the current assignment (committing first when still a member
    /// of the generation); the loop rejoins.
    async fn give_up_assignment(&mut self, commit_first: bool) {
        if commit_first {
            if let Err(e) = self.commit().await {
                tracing::debug!(error = %e, "commit before the rebalance failed");
            }
        }
        let held = plain(self.positions.keys());
        self.s.tell(if commit_first {
            RebalanceEvent::Revoked(held)
        } else {
            RebalanceEvent::Lost(held)
        });
        self.member = None;
        self.positions.clear();
        self.ready.clear();
        self.ready_bytes = 0;
        self.acks.lock().expect("acks lock").partitions.clear();
        self.assignment_view
            .lock()
            .expect("assignment lock")
            .clear();
    }

    /// Commits, per assigned partition, the offset below which every
    /// delivered record was acknowledged, where it moved.
    async fn commit(&mut self) -> Result<()> {
        let Some(m) = &self.member else {
            return Ok(());
        };
        let points = self.acks.lock().expect("acks lock").due();
        if points.is_empty() {
            return Ok(());
        }
        let mut by_topic: BTreeMap<Arc<str>, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (tp, o) in &points {
            by_topic.entry(tp.0.clone()).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(tp.1)
                    .with_committed_offset(*o)
                    .with_committed_leader_epoch(-1),
            );
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.s.group_id.clone())))
            .with_generation_id_or_member_epoch(m.generation_id)
            .with_member_id(StrBytes::from_string(m.member_id.clone()))
            .with_retention_time_ms(-1)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.to_string())))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        // A KIP-848 member commits with its epoch, which needs v9.
        let versions = match m.protocol {
            Protocol::Classic => OFFSET_COMMIT_VERSIONS,
            Protocol::Consumer(_) => (9, OFFSET_COMMIT_VERSIONS.1),
        };
        let resp = m.coordinator.call(&req, versions).await?;
        let mut failed = None;
        let mut done = Vec::with_capacity(points.len());
        for t in resp.topics {
            for p in t.partitions {
                let tp_name = t.name.0.as_str();
                if p.error_code != 0 {
                    failed = Some(Error::kafka(
                        p.error_code,
                        format!("OffsetCommit {tp_name}-{}", p.partition_index),
                    ));
                    continue;
                }
                done.extend(
                    points
                        .iter()
                        .find(|(tp, _)| &*tp.0 == tp_name && tp.1 == p.partition_index)
                        .cloned(),
                );
            }
        }
        self.acks.lock().expect("acks lock").committed(&done);
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn leave(&mut self) {
        let Some(m) = self.member.take() else { return };
        if let Protocol::Consumer(version) = m.protocol {
            return self.leave_consumer(m, version).await;
        }
        let version = m
            .coordinator
            .version::<LeaveGroupRequest>(LEAVE_GROUP_VERSIONS)
            .unwrap_or(1);
        let mut req = LeaveGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.s.group_id.clone())));
        if version >= 3 {
            req = req.with_members(vec![MemberIdentity::default()
                .with_member_id(StrBytes::from_string(m.member_id.clone()))]);
        } else {
            req = req.with_member_id(StrBytes::from_string(m.member_id.clone()));
        }
        let _ = m.coordinator.call_version(&req, version).await;
    }
}

/// (topic, partition) pairs as the caller sees them.
fn plain<'a>(tps: impl Iterator<Item = &'a Tp>) -> Vec<(String, i32)> {
    tps.map(|tp| (tp.0.to_string(), tp.1)).collect()
}

/// The session epoch after `e` (1 after the largest, as Kafka wraps).
fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

/// Group errors after which joining again is the answer.
fn is_group_retry(e: &Error) -> bool {
    matches!(e, Error::Kafka { code, .. } if matches!(code, 14 | 15 | 16 | 22 | 25 | 27 | 79 | 110))
}
