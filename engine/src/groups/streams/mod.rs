//! One streams group (KIP-1071, StreamsGroupHeartbeat): the members of a
//! Kafka Streams application send its topology when they join; the
//! coordinator decides the partitions of its internal topics (and asks for
//! those missing to be created), cuts it into tasks (a subtopology's
//! partition) and assigns them, sticky, active and standby, balanced over
//! the application's processes. As in a consumer group, a member moves to
//! the assignment epoch only after it has revoked what its target no longer
//! holds, and takes an active task only when nobody else still owns it.
//!
//! Durable: the topology (the group row's data), the members with their
//! tasks and targets, and the epochs; the configured topology is computed
//! again when the group is loaded.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, BytesMut};
use rutomq_meta::groups::StoredGroup;

use super::consumer::TopicsView;
use super::sets::{count, intersects, minus};
use super::stored::{
    get_i32, get_keyed, get_list, get_str, put_keyed, put_list, put_str, GroupType,
    Member as StoredMember, Stored,
};
use crate::error::ErrorCode;
use topology::{get_pair, put_pair};

mod assign;
mod heartbeat;
#[cfg(test)]
mod tests;
pub mod topology;

pub use heartbeat::{EndpointPartitions, StreamsHeartbeatArgs, StreamsHeartbeatResult};
pub use topology::{status, Configured, Creatable, Topology};

/// Kafka's streams-group settings, named after the broker configs.
#[derive(Clone, Debug)]
pub struct StreamsConfig {
    /// group.streams.session.timeout.ms
    pub session_timeout: Duration,
    /// group.streams.heartbeat.interval.ms
    pub heartbeat_interval: Duration,
    /// group.streams.max.size
    pub size_max: usize,
    /// group.streams.num.standby.replicas
    pub standby_replicas: u32,
    /// group.streams.initial.rebalance.delay.ms
    pub initial_rebalance_delay: Duration,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        StreamsConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            size_max: 1000,
            standby_replicas: 0,
            initial_rebalance_delay: Duration::from_millis(3_000),
        }
    }
}

/// The only assignor of streams groups.
pub const ASSIGNOR: &str = "sticky";

/// Tasks by subtopology id.
pub type TaskSet = super::sets::Keyed<String>;

/// A member's tasks of each kind (warm-up tasks are never assigned).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tasks {
    pub active: TaskSet,
    pub standby: TaskSet,
}

fn set_contains(a: &TaskSet, s: &str, p: i32) -> bool {
    a.get(s).is_some_and(|ps| ps.contains(&p))
}

fn set_insert(a: &mut TaskSet, s: &str, p: i32) {
    a.entry(s.to_owned()).or_default().insert(p);
}

impl Tasks {
    pub fn is_empty(&self) -> bool {
        count(&self.active) == 0 && count(&self.standby) == 0
    }

    pub fn minus(&self, other: &Tasks) -> Tasks {
        Tasks {
            active: minus(&self.active, &other.active),
            standby: minus(&self.standby, &other.standby),
        }
    }

    pub fn intersects(&self, other: &Tasks) -> bool {
        intersects(&self.active, &other.active) || intersects(&self.standby, &other.standby)
    }

    /// Every task, of either kind.
    fn holds(&self, s: &str, p: i32) -> bool {
        set_contains(&self.active, s, p) || set_contains(&self.standby, s, p)
    }

    /// Whether every task is one of `tasks`' tasks (of the same kind).
    fn within(&self, tasks: &Tasks) -> bool {
        self.minus(tasks).is_empty()
    }
}

/// A member's endpoint for interactive queries (application.server).
pub type Endpoint = (String, u16);

#[derive(Clone, Debug)]
pub struct StreamsMember {
    pub member_id: String,
    pub process_id: String,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topology_epoch: i32,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Vec<(String, String)>,
    pub rebalance_timeout: Duration,
    pub epoch: i32,
    previous_epoch: i32,
    /// The tasks it owns (pending revocation excluded).
    pub assigned: Tasks,
    /// Tasks it was asked to give up and has not yet.
    pub revoking: Tasks,
    /// The epoch each active task was assigned at (OffsetCommit accepts an
    /// older member epoch for a task assigned no later).
    active_epochs: BTreeMap<(String, i32), i32>,
    /// What the last answer told it (not durable: after a reload it is
    /// told again).
    sent: Option<Tasks>,
    session_deadline: Instant,
    revoke_deadline: Option<Instant>,
}

pub struct StreamsGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, StreamsMember>,
    /// The target assignment of the assignment epoch.
    pub target: HashMap<String, Tasks>,
    pub topology: Option<Topology>,
    /// The topology against the topics (`None`: not computed since
    /// loaded, or no topology).
    pub configured: Option<Configured>,
    /// The topology epoch last found runnable (-1: not runnable now).
    pub validated_topology_epoch: i32,
    /// The tasks the stored target was computed for (what a reload
    /// compares the configured topology with).
    stored_tasks: BTreeMap<String, i32>,
    /// Loaded, and the coordinator's view of its topics not refreshed
    /// since: the topology is configured once it is.
    pub(super) awaiting_view: bool,
    /// When the handler was last asked to create the missing internal
    /// topics.
    create_asked: Option<Instant>,
    pub state_since_ms: i64,
    /// Standby replicas of each stateful task (the group's
    /// streams.num.standby.replicas, or the agent's).
    standby_replicas: u32,
    /// The first member's initial rebalance delay ends then.
    delay_until: Option<Instant>,
    /// A member asked the whole application to shut down.
    pub shutdown_requested_by: Option<String>,
    /// Moves whenever endpoint information changes (not durable, as in
    /// Kafka).
    pub endpoint_epoch: i32,
    cfg: StreamsConfig,
}

impl StreamsGroup {
    pub fn new(group_id: String, cfg: StreamsConfig) -> StreamsGroup {
        StreamsGroup {
            group_id,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: HashMap::new(),
            topology: None,
            configured: None,
            validated_topology_epoch: -1,
            stored_tasks: BTreeMap::new(),
            awaiting_view: false,
            create_asked: None,
            state_since_ms: crate::wall::now_ms(),
            standby_replicas: cfg.standby_replicas,
            delay_until: None,
            shutdown_requested_by: None,
            endpoint_epoch: 0,
            cfg,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's streams group states.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.configured.as_ref().is_some_and(|c| !c.is_ready())
            || self.validated_topology_epoch < 0
        {
            "NotReady"
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

    /// The topics its offsets are for (sources and repartition sources):
    /// those OffsetDelete keeps while the group has members.
    pub fn consumed_topics(&self) -> BTreeSet<String> {
        let Some(t) = &self.topology else {
            return BTreeSet::new();
        };
        t.subtopologies
            .iter()
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .cloned()
                    .chain(s.repartition_source_topics.iter().map(|t| t.name.clone()))
            })
            .collect()
    }

    /// Every topic its topology names (the coordinator keeps them in view).
    pub fn required_topics(&self) -> BTreeSet<String> {
        self.topology
            .as_ref()
            .map(Topology::topic_names)
            .unwrap_or_default()
    }

    fn bump(&mut self) {
        self.group_epoch = if self.group_epoch == 0 {
            2
        } else {
            self.group_epoch + 1
        };
        self.state_since_ms = crate::wall::now_ms();
    }

    /// The coordinator's view now holds what it found of `names`: a loaded
    /// group whose topics were among them configures its topology.
    pub fn view_refreshed(&mut self, names: &BTreeSet<String>) {
        if self.awaiting_view && self.required_topics().is_subset(names) {
            self.awaiting_view = false;
        }
    }

    pub fn next_wake(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline), m.revoke_deadline])
            .flatten()
            .chain(self.delay_until)
            .min()
    }

    /// Removes members whose session or revocation time ran out, and ends
    /// the initial delay. Returns how many members went and whether the
    /// group changed.
    pub fn on_timer(&mut self, now: Instant, topics: &TopicsView) -> (u64, bool) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline <= now || m.revoke_deadline.is_some_and(|d| d <= now))
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %self.group_id, member = %id, "streams group member timed out; removing it");
            self.remove_member(id);
        }
        let mut changed = !gone.is_empty();
        if self.delay_until.is_some_and(|d| d <= now) {
            self.delay_until = None;
            changed = true;
        }
        if changed {
            self.maybe_assign(topics);
        }
        (gone.len() as u64, changed)
    }

    pub(super) fn remove_member(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.bump();
        }
        if self.members.is_empty() {
            self.shutdown_requested_by = None;
            self.delay_until = None;
        }
    }

    /// Validates an offset commit of a member (OffsetCommit v9+ and
    /// TxnOffsetCommit carry its epoch). `topics`: the committed topics'
    /// names and partitions.
    pub fn validate_commit(
        &self,
        member_id: &str,
        epoch: i32,
        topics: &[(&str, i32)],
    ) -> Result<(), (ErrorCode, String)> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(member_id) else {
            return Err((
                ErrorCode::UnknownMemberId,
                format!(
                    "Member {member_id} is not a member of group {}.",
                    self.group_id
                ),
            ));
        };
        if epoch == m.epoch {
            return Ok(());
        }
        if epoch > m.epoch {
            return Err((
                ErrorCode::StaleMemberEpoch,
                format!(
                    "Received member epoch {epoch} is newer than current member epoch {}.",
                    m.epoch
                ),
            ));
        }
        // An older epoch is fine for the tasks it still owns (or is giving
        // up) since then.
        let topology = self.topology.as_ref();
        for (topic, p) in topics {
            let Some(s) = topology.and_then(|t| t.subtopology_of(topic)) else {
                return Err((
                    ErrorCode::StaleMemberEpoch,
                    format!("Topic {topic} is not in the topology."),
                ));
            };
            let owned =
                set_contains(&m.assigned.active, s, *p) || set_contains(&m.revoking.active, s, *p);
            if !owned {
                return Err((
                    ErrorCode::StaleMemberEpoch,
                    format!("Task {s}-{p} is not assigned or pending revocation for member."),
                ));
            }
            let since = m
                .active_epochs
                .get(&(s.to_owned(), *p))
                .copied()
                .unwrap_or(0);
            if epoch < since {
                return Err((
                    ErrorCode::StaleMemberEpoch,
                    format!(
                        "Received member epoch {epoch} is older than assignment epoch {since} for task {s}-{p}."
                    ),
                ));
            }
        }
        Ok(())
    }

    /// OffsetFetch from a member: it must be one, at its epoch.
    pub fn validate_fetch(&self, member_id: &str, epoch: i32) -> ErrorCode {
        match self.members.get(member_id) {
            None => ErrorCode::UnknownMemberId,
            Some(m) if m.epoch != epoch => ErrorCode::StaleMemberEpoch,
            Some(_) => ErrorCode::None,
        }
    }

    // ---- storage -------------------------------------------------------------

    pub fn snapshot(&self) -> StoredGroup {
        let mut data = BytesMut::new();
        data.put_u8(1);
        data.put_u32(self.standby_replicas);
        data.put_i32(self.validated_topology_epoch);
        put_str(
            &mut data,
            self.shutdown_requested_by.as_deref().unwrap_or(""),
        );
        let tasks = self
            .configured
            .as_ref()
            .map_or(&self.stored_tasks, |c| &c.tasks);
        put_list(&mut data, tasks, |b, (s, n)| {
            put_str(b, s);
            b.put_i32(*n);
        });
        if let Some(t) = &self.topology {
            t.encode(&mut data);
        }
        Stored {
            group_type: GroupType::Streams,
            group_id: self.group_id.clone(),
            protocol_type: Some("streams".into()),
            protocol_name: Some(ASSIGNOR.into()),
            generation: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            leader_id: None,
            state_since_ms: self.state_since_ms,
            data: data.to_vec(),
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    instance_id: None,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout: self.cfg.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    subscription: encode_member(m),
                    assignment: encode_tasks(
                        m,
                        self.target.get(&m.member_id).unwrap_or(&Tasks::default()),
                    ),
                })
                .collect(),
        }
        .into()
    }

    /// A stored group: every member's session starts again; the topology
    /// is configured again on the next heartbeat or topics refresh.
    pub fn load(stored: StoredGroup, cfg: StreamsConfig, now: Instant) -> StreamsGroup {
        let stored = Stored::from(stored);
        let mut g = StreamsGroup::new(stored.group_id, cfg);
        g.group_epoch = stored.generation;
        g.assignment_epoch = stored.assignment_epoch;
        g.state_since_ms = stored.state_since_ms;
        if decode_data(&mut g, stored.data.as_slice()).is_none() {
            tracing::warn!(group = %g.group_id, "unreadable stored streams group topology; members join again");
        }
        g.awaiting_view = true;
        for s in stored.members {
            let Some(mut m) = decode_member(&s.subscription) else {
                tracing::warn!(group = %g.group_id, member = %s.member_id, "unreadable stored streams member; it rejoins");
                continue;
            };
            let Some(target) = decode_tasks(&s.assignment, &mut m) else {
                tracing::warn!(group = %g.group_id, member = %s.member_id, "unreadable stored streams member; it rejoins");
                continue;
            };
            m.member_id = s.member_id.clone();
            m.client_id = s.client_id;
            m.client_host = s.client_host;
            m.rebalance_timeout = s.rebalance_timeout;
            m.session_deadline = now + g.cfg.session_timeout;
            if !m.revoking.is_empty() {
                m.revoke_deadline = Some(now + m.rebalance_timeout);
            }
            g.target.insert(s.member_id.clone(), target);
            g.members.insert(s.member_id, m);
        }
        g
    }
}

/// The group's own stored fields, version 1: standby replicas, validated
/// topology epoch, who asked for a shutdown, the tasks per subtopology,
/// then the topology.
fn decode_data(g: &mut StreamsGroup, mut d: &[u8]) -> Option<()> {
    let d = &mut d;
    if d.remaining() < 9 || d.get_u8() != 1 {
        return None;
    }
    g.standby_replicas = d.get_u32();
    g.validated_topology_epoch = d.get_i32();
    g.shutdown_requested_by = get_str(d).filter(|s| !s.is_empty());
    let tasks = get_list(d, |d| Some((get_str(d)?, get_i32(d)?)))?;
    g.stored_tasks = tasks.into_iter().collect();
    if d.has_remaining() {
        g.topology = Some(Topology::decode(d)?);
    }
    Some(())
}

fn blank_member(member_id: &str, now: Instant) -> StreamsMember {
    StreamsMember {
        member_id: member_id.to_owned(),
        process_id: String::new(),
        rack_id: None,
        client_id: String::new(),
        client_host: String::new(),
        topology_epoch: -1,
        user_endpoint: None,
        client_tags: Vec::new(),
        rebalance_timeout: Duration::ZERO,
        epoch: 0,
        previous_epoch: -1,
        assigned: Tasks::default(),
        revoking: Tasks::default(),
        active_epochs: BTreeMap::new(),
        sent: None,
        session_deadline: now,
        revoke_deadline: None,
    }
}

/// A member's own fields, version 1.
fn encode_member(m: &StreamsMember) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(1);
    put_str(&mut b, &m.process_id);
    put_str(&mut b, m.rack_id.as_deref().unwrap_or(""));
    b.put_i32(m.topology_epoch);
    match &m.user_endpoint {
        Some((host, port)) => {
            b.put_u8(1);
            put_str(&mut b, host);
            b.put_u16(*port);
        }
        None => b.put_u8(0),
    }
    put_list(&mut b, &m.client_tags, put_pair);
    b.to_vec()
}

fn decode_member(mut b: &[u8]) -> Option<StreamsMember> {
    let b = &mut b;
    if b.remaining() < 1 || b.get_u8() != 1 {
        return None;
    }
    let mut m = blank_member("", Instant::now());
    m.process_id = get_str(b)?;
    m.rack_id = Some(get_str(b)?).filter(|r| !r.is_empty());
    m.topology_epoch = get_i32(b)?;
    if b.remaining() < 1 {
        return None;
    }
    if b.get_u8() == 1 {
        let host = get_str(b)?;
        if b.remaining() < 2 {
            return None;
        }
        m.user_endpoint = Some((host, b.get_u16()));
    }
    m.client_tags = get_list(b, get_pair)?;
    Some(m)
}

fn put_tasks(b: &mut BytesMut, t: &Tasks) {
    for set in [&t.active, &t.standby] {
        put_keyed(b, set, |b, s| put_str(b, s));
    }
}

fn get_tasks(b: &mut &[u8]) -> Option<Tasks> {
    Some(Tasks {
        active: get_keyed(b, get_str)?,
        standby: get_keyed(b, get_str)?,
    })
}

/// A member's epochs and tasks, version 1: epoch, previous epoch,
/// assigned, revoking, target, then each active task's epoch.
fn encode_tasks(m: &StreamsMember, target: &Tasks) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(1);
    b.put_i32(m.epoch);
    b.put_i32(m.previous_epoch);
    for t in [&m.assigned, &m.revoking, target] {
        put_tasks(&mut b, t);
    }
    put_list(&mut b, &m.active_epochs, |b, ((s, p), e)| {
        put_str(b, s);
        b.put_i32(*p);
        b.put_i32(*e);
    });
    b.to_vec()
}

/// Fills `m`'s epochs and tasks; returns its target.
fn decode_tasks(mut b: &[u8], m: &mut StreamsMember) -> Option<Tasks> {
    let b = &mut b;
    if b.remaining() < 1 || b.get_u8() != 1 {
        return None;
    }
    m.epoch = get_i32(b)?;
    m.previous_epoch = get_i32(b)?;
    m.assigned = get_tasks(b)?;
    m.revoking = get_tasks(b)?;
    let target = get_tasks(b)?;
    let epochs = get_list(b, |b| Some(((get_str(b)?, get_i32(b)?), get_i32(b)?)))?;
    m.active_epochs = epochs.into_iter().collect();
    Some(target)
}
