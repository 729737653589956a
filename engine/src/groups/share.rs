//! One share group (KIP-932, ShareGroupHeartbeat): members subscribe to
//! topics and the coordinator assigns them partitions with Kafka's
//! `simple` assignor. Unlike a consumer group, a partition may be assigned
//! to several members at once (records, not partitions, are what members
//! get exclusively: see [`crate::share`]), so an assignment changes at
//! once, without revocation: a member's epoch is the group's.
//!
//! Durable: the members and their subscriptions (the group's row, type
//! `share`); the assignment is computed again when the group is loaded.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rutomq_meta::groups::StoredGroup;

use super::consumer::{Partitions, TopicsView};
use super::stored::{
    decode_share_subscription, encode_share_subscription, GroupType, Member as StoredMember, Stored,
};
use crate::error::ErrorCode;

/// Kafka's share-group settings, named after the broker configs.
#[derive(Clone, Debug)]
pub struct ShareConfig {
    /// group.share.session.timeout.ms
    pub session_timeout: Duration,
    /// group.share.heartbeat.interval.ms
    pub heartbeat_interval: Duration,
    /// group.share.max.size
    pub size_max: usize,
    /// How the groups' share-partitions hand out records
    /// (group.share.delivery.count.limit, group.share.record.lock.duration.ms,
    /// group.share.partition.max.record.locks).
    pub rules: crate::share::partition::Rules,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            size_max: 200,
            rules: Default::default(),
        }
    }
}

pub struct ShareHeartbeatArgs {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// `None`: unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
    /// The group's own share.session.timeout.ms and
    /// share.heartbeat.interval.ms, when its group configs set them.
    pub session_timeout: Option<Duration>,
    pub heartbeat_interval: Option<Duration>,
}

#[derive(Clone, Debug)]
pub struct ShareHeartbeatResult {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<Partitions>,
}

impl ShareHeartbeatResult {
    pub fn error(error: ErrorCode, message: impl Into<Option<String>>) -> ShareHeartbeatResult {
        ShareHeartbeatResult {
            error,
            error_message: message.into(),
            member_id: String::new(),
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ShareMember {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub epoch: i32,
    previous_epoch: i32,
    pub assigned: Partitions,
    session_deadline: Instant,
}

pub struct ShareGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    pub state_since_ms: i64,
    /// The subscribed topics' metadata the assignment was computed from.
    assigned_with: Option<BTreeMap<String, (uuid::Uuid, i32)>>,
    cfg: ShareConfig,
}

/// The only assignor of share groups here (group.share.assignors).
pub const ASSIGNOR: &str = "simple";

impl ShareGroup {
    pub fn new(group_id: String, cfg: ShareConfig) -> ShareGroup {
        ShareGroup {
            group_id,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            state_since_ms: crate::wall::now_ms(),
            assigned_with: None,
            cfg,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's share group states: Empty or Stable (no reconciliation).
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }

    pub fn next_wake(&self) -> Option<Instant> {
        self.members.values().map(|m| m.session_deadline).min()
    }

    fn bump(&mut self) {
        self.group_epoch += 1;
        self.state_since_ms = crate::wall::now_ms();
    }

    /// Handles one heartbeat; `changed` is set when the durable state
    /// (members, subscriptions) changed.
    pub fn heartbeat(
        &mut self,
        a: ShareHeartbeatArgs,
        topics: &TopicsView,
        now: Instant,
        changed: &mut bool,
    ) -> ShareHeartbeatResult {
        let session = a.session_timeout.unwrap_or(self.cfg.session_timeout);
        if a.member_id.is_empty() {
            return ShareHeartbeatResult::error(
                ErrorCode::InvalidRequest,
                "MemberId can't be empty.".to_owned(),
            );
        }
        match a.member_epoch {
            0 => {
                let Some(mut subscribed) = a.subscribed_topic_names.clone() else {
                    return ShareHeartbeatResult::error(
                        ErrorCode::InvalidRequest,
                        "SubscribedTopicNames must be set in first request.".to_owned(),
                    );
                };
                subscribed.sort();
                subscribed.dedup();
                match self.members.get_mut(&a.member_id) {
                    // A member joining again (after a fence or a lost answer).
                    Some(m) => {
                        if m.subscribed != subscribed {
                            m.subscribed = subscribed;
                            self.bump();
                            *changed = true;
                        }
                    }
                    None => {
                        if self.members.len() >= self.cfg.size_max {
                            return ShareHeartbeatResult::error(
                                ErrorCode::GroupMaxSizeReached,
                                format!(
                                    "The share group has reached its maximum capacity of {} members.",
                                    self.cfg.size_max
                                ),
                            );
                        }
                        self.members.insert(
                            a.member_id.clone(),
                            ShareMember {
                                member_id: a.member_id.clone(),
                                rack_id: a.rack_id.clone(),
                                client_id: a.client_id.clone(),
                                client_host: a.client_host.clone(),
                                subscribed,
                                epoch: 0,
                                previous_epoch: -1,
                                assigned: Partitions::new(),
                                session_deadline: now + session,
                            },
                        );
                        self.bump();
                        *changed = true;
                    }
                }
            }
            -1 => {
                if self.members.remove(&a.member_id).is_none() {
                    return ShareHeartbeatResult::error(
                        ErrorCode::UnknownMemberId,
                        format!(
                            "Member {} is not a member of group {}.",
                            a.member_id, self.group_id
                        ),
                    );
                }
                tracing::debug!(group = %self.group_id, member = %a.member_id, "share group member left");
                self.bump();
                self.assign(topics);
                *changed = true;
                return ShareHeartbeatResult {
                    error: ErrorCode::None,
                    error_message: None,
                    member_id: a.member_id,
                    member_epoch: -1,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                };
            }
            epoch => {
                let Some(m) = self.members.get_mut(&a.member_id) else {
                    return ShareHeartbeatResult::error(
                        ErrorCode::UnknownMemberId,
                        format!(
                            "Member {} is not a member of group {}.",
                            a.member_id, self.group_id
                        ),
                    );
                };
                // The previous epoch is fine: the answer that moved the
                // member on may have been lost.
                if epoch != m.epoch && epoch != m.previous_epoch {
                    return ShareHeartbeatResult::error(
                        ErrorCode::FencedMemberEpoch,
                        format!(
                            "The share group member has a member epoch ({epoch}) other than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                            m.epoch
                        ),
                    );
                }
                if let Some(mut t) = a.subscribed_topic_names.clone() {
                    t.sort();
                    t.dedup();
                    if t != m.subscribed {
                        m.subscribed = t;
                        self.bump();
                        *changed = true;
                    }
                }
            }
        }
        if let Some(m) = self.members.get_mut(&a.member_id) {
            m.session_deadline = now + session;
            m.client_id = a.client_id;
            m.client_host = a.client_host;
            if a.rack_id.is_some() {
                m.rack_id = a.rack_id;
            }
        }
        let before = self.group_epoch;
        self.maybe_assign(topics);
        // Epochs are stored as they move: after a reload, members go on
        // at theirs.
        *changed |= self.group_epoch != before;
        // The member takes the assignment of the group's epoch now (no
        // revocation to wait for).
        let epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(&a.member_id) else {
            return ShareHeartbeatResult::error(ErrorCode::UnknownMemberId, None);
        };
        if m.epoch != epoch {
            m.previous_epoch = m.epoch;
            m.epoch = epoch;
            *changed = true;
        }
        ShareHeartbeatResult {
            error: ErrorCode::None,
            error_message: None,
            member_id: a.member_id.clone(),
            member_epoch: m.epoch,
            heartbeat_interval_ms: a
                .heartbeat_interval
                .unwrap_or(self.cfg.heartbeat_interval)
                .as_millis() as i32,
            assignment: Some(m.assigned.clone()),
        }
    }

    /// Assigns again when the group epoch moved or the subscribed topics'
    /// partitions changed.
    pub fn maybe_assign(&mut self, topics: &TopicsView) {
        let view: BTreeMap<String, (uuid::Uuid, i32)> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| topics.get(&t).map(|v| (t, *v)))
            .collect();
        if self.assignment_epoch == self.group_epoch && self.assigned_with.as_ref() == Some(&view) {
            return;
        }
        if self.assigned_with.is_some() && self.assigned_with.as_ref() != Some(&view) {
            self.bump();
        }
        self.assign(topics);
    }

    /// Kafka's `simple` share assignor, topic by topic: the partitions of
    /// a topic go round-robin to the members subscribed to it; when the
    /// members outnumber the partitions, each member gets one partition
    /// and partitions are shared.
    fn assign(&mut self, topics: &TopicsView) {
        let mut view = BTreeMap::new();
        for m in self.members.values_mut() {
            m.assigned.clear();
        }
        let mut offset = 0usize;
        for topic in self.subscribed_topics() {
            let Some(&(id, count)) = topics.get(&topic) else {
                continue;
            };
            view.insert(topic.clone(), (id, count));
            let subscribers: Vec<String> = self
                .members
                .values()
                .filter(|m| m.subscribed.contains(&topic))
                .map(|m| m.member_id.clone())
                .collect();
            let (n, p) = (subscribers.len(), count.max(0) as usize);
            if n == 0 || p == 0 {
                continue;
            }
            if p >= n {
                for partition in 0..p {
                    let who = &subscribers[(partition + offset) % n];
                    if let Some(m) = self.members.get_mut(who) {
                        m.assigned.entry(id).or_default().insert(partition as i32);
                    }
                }
            } else {
                for (i, who) in subscribers.iter().enumerate() {
                    if let Some(m) = self.members.get_mut(who) {
                        m.assigned
                            .entry(id)
                            .or_default()
                            .insert(((i + offset) % p) as i32);
                    }
                }
            }
            offset += 1;
        }
        self.assigned_with = Some(view);
        self.assignment_epoch = self.group_epoch;
    }

    /// Removes members whose session ran out; how many went.
    pub fn on_timer(&mut self, now: Instant, topics: &TopicsView) -> u64 {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %self.group_id, member = %id, "share group member timed out; removing it");
            self.members.remove(id);
        }
        if !gone.is_empty() {
            self.bump();
            self.assign(topics);
        }
        gone.len() as u64
    }

    pub fn snapshot(&self) -> StoredGroup {
        Stored {
            group_type: GroupType::Share,
            group_id: self.group_id.clone(),
            protocol_type: Some("share".into()),
            protocol_name: Some(ASSIGNOR.into()),
            generation: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            leader_id: None,
            state_since_ms: self.state_since_ms,
            data: Vec::new(),
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    instance_id: None,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout: self.cfg.session_timeout,
                    rebalance_timeout: Duration::ZERO,
                    subscription: encode_share_subscription(&m.subscribed, m.rack_id.as_deref()),
                    assignment: m.epoch.to_be_bytes().to_vec(),
                })
                .collect(),
        }
        .into()
    }

    /// A stored group; every member's session starts again, and the
    /// assignment is computed on the first heartbeat.
    pub fn load(stored: StoredGroup, cfg: ShareConfig, now: Instant) -> ShareGroup {
        let stored = Stored::from(stored);
        let mut g = ShareGroup::new(stored.group_id, cfg);
        g.group_epoch = stored.generation;
        g.assignment_epoch = stored.assignment_epoch;
        g.state_since_ms = stored.state_since_ms;
        for s in stored.members {
            let (subscribed, rack_id) = decode_share_subscription(&s.subscription);
            let epoch = <[u8; 4]>::try_from(s.assignment.as_slice())
                .map_or(g.group_epoch, i32::from_be_bytes);
            g.members.insert(
                s.member_id.clone(),
                ShareMember {
                    member_id: s.member_id,
                    rack_id,
                    client_id: s.client_id,
                    client_host: s.client_host,
                    subscribed,
                    epoch,
                    previous_epoch: -1,
                    assigned: Partitions::new(),
                    session_deadline: now + g.cfg.session_timeout,
                },
            );
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hb(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeatArgs {
        ShareHeartbeatArgs {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            rack_id: None,
            subscribed_topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: None,
            heartbeat_interval: None,
        }
    }

    #[test]
    fn members_beyond_the_partitions_share_them() {
        let id = uuid::Uuid::new_v4();
        let topics: TopicsView = [("t".to_owned(), (id, 1))].into();
        let mut g = ShareGroup::new("g".into(), ShareConfig::default());
        let now = Instant::now();
        let mut changed = false;
        let a = g.heartbeat(hb("a", 0, Some(&["t"])), &topics, now, &mut changed);
        let b = g.heartbeat(hb("b", 0, Some(&["t"])), &topics, now, &mut changed);
        assert!(changed);
        assert_eq!(b.assignment.unwrap()[&id], [0].into());
        assert_eq!(b.member_epoch, 2);
        // a learns the new epoch on its next heartbeat, with the same partition.
        let next = g.heartbeat(hb("a", a.member_epoch, None), &topics, now, &mut changed);
        assert_eq!(next.member_epoch, 2);
        assert_eq!(next.assignment.unwrap()[&id], [0].into());
        // The previous epoch is fine (a lost answer), an older one is not.
        let lost = g.heartbeat(hb("a", 1, None), &topics, now, &mut changed);
        assert_eq!(lost.error, ErrorCode::None);
        g.heartbeat(hb("c", 0, Some(&["t"])), &topics, now, &mut changed);
        g.heartbeat(hb("a", 2, None), &topics, now, &mut changed);
        let stale = g.heartbeat(hb("a", 1, None), &topics, now, &mut changed);
        assert_eq!(stale.error, ErrorCode::FencedMemberEpoch);
    }

    #[test]
    fn partitions_are_spread_and_a_leaver_gives_them_back() {
        let id = uuid::Uuid::new_v4();
        let topics: TopicsView = [("t".to_owned(), (id, 4))].into();
        let mut g = ShareGroup::new("g".into(), ShareConfig::default());
        let now = Instant::now();
        let mut changed = false;
        g.heartbeat(hb("a", 0, Some(&["t"])), &topics, now, &mut changed);
        let b = g.heartbeat(hb("b", 0, Some(&["t"])), &topics, now, &mut changed);
        assert_eq!(b.assignment.unwrap()[&id].len(), 2);
        assert_eq!(g.members["a"].assigned[&id].len(), 2);
        let left = g.heartbeat(hb("b", b.member_epoch, None), &topics, now, &mut changed);
        assert_eq!(left.error, ErrorCode::None);
        g.heartbeat(hb("b", -1, None), &topics, now, &mut changed);
        assert_eq!(g.members["a"].assigned[&id].len(), 4);
        assert_eq!(
            g.heartbeat(hb("b", -1, None), &topics, now, &mut changed)
                .error,
            ErrorCode::UnknownMemberId
        );
    }

    #[test]
    fn joining_needs_a_member_id_and_topics() {
        let mut g = ShareGroup::new("g".into(), ShareConfig::default());
        let mut changed = false;
        let topics = TopicsView::new();
        let now = Instant::now();
        assert_eq!(
            g.heartbeat(hb("", 0, Some(&["t"])), &topics, now, &mut changed)
                .error,
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            g.heartbeat(hb("a", 0, None), &topics, now, &mut changed)
                .error,
            ErrorCode::InvalidRequest
        );
        assert!(!changed);
    }

    #[test]
    fn a_stored_group_loads_its_members() {
        let id = uuid::Uuid::new_v4();
        let topics: TopicsView = [("t".to_owned(), (id, 2))].into();
        let mut g = ShareGroup::new("g".into(), ShareConfig::default());
        let now = Instant::now();
        let mut changed = false;
        g.heartbeat(hb("a", 0, Some(&["t"])), &topics, now, &mut changed);
        let loaded = ShareGroup::load(g.snapshot(), ShareConfig::default(), now);
        assert_eq!(loaded.members["a"].subscribed, vec!["t".to_owned()]);
        assert_eq!(loaded.group_epoch, g.group_epoch);
        assert_eq!(loaded.members["a"].epoch, g.members["a"].epoch);
    }
}
