//! StreamsGroupHeartbeat: members join with the topology, report the
//! tasks they own, and leave.

use super::*;

pub struct StreamsHeartbeatArgs {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// Sent when joining.
    pub topology: Option<Topology>,
    /// `None`: unchanged since the last heartbeat.
    pub owned: Option<Tasks>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Option<Vec<(String, String)>>,
    pub shutdown_application: bool,
    pub client_id: String,
    pub client_host: String,
    /// The group's own streams.session.timeout.ms and
    /// streams.heartbeat.interval.ms, when its group configs set them.
    pub session_timeout: Option<Duration>,
    pub heartbeat_interval: Option<Duration>,
    /// Its streams.initial.rebalance.delay.ms and
    /// streams.num.standby.replicas, when set.
    pub initial_rebalance_delay: Option<Duration>,
    pub standby_replicas: Option<u32>,
}

/// A member's endpoint and the partitions of its tasks (interactive
/// queries): (endpoint, active, standby), partitions by topic name.
pub type EndpointPartitions = (Endpoint, Vec<(String, Vec<i32>)>, Vec<(String, Vec<i32>)>);

#[derive(Clone, Debug, Default)]
pub struct StreamsHeartbeatResult {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// `None`: unchanged since the last answer.
    pub assignment: Option<Tasks>,
    pub statuses: Vec<(i8, String)>,
    pub endpoint_epoch: i32,
    pub endpoints: Option<Vec<EndpointPartitions>>,
    /// Internal topics the group waits for: the handler creates them.
    pub create: Vec<Creatable>,
}

impl StreamsHeartbeatResult {
    pub fn error(error: ErrorCode, message: impl Into<Option<String>>) -> StreamsHeartbeatResult {
        StreamsHeartbeatResult {
            error,
            error_message: message.into(),
            member_epoch: -1,
            ..Default::default()
        }
    }
}

impl StreamsGroup {
    /// Handles one heartbeat; `changed` is set when the durable state
    /// changed (the answer must wait for it to be stored).
    pub fn heartbeat(
        &mut self,
        a: StreamsHeartbeatArgs,
        topics: &TopicsView,
        now: Instant,
        changed: &mut bool,
    ) -> StreamsHeartbeatResult {
        let not_member = || {
            StreamsHeartbeatResult::error(
                ErrorCode::UnknownMemberId,
                format!(
                    "Member {} is not a member of group {}.",
                    a.member_id, self.group_id
                ),
            )
        };
        if a.member_epoch < 0 {
            if !self.members.contains_key(&a.member_id) {
                return not_member();
            }
            tracing::debug!(group = %self.group_id, member = %a.member_id, "streams group member left");
            if a.shutdown_application && self.shutdown_requested_by.is_none() {
                self.shutdown_requested_by = Some(a.member_id.clone());
            }
            self.remove_member(&a.member_id);
            self.maybe_assign(topics);
            *changed = true;
            return StreamsHeartbeatResult {
                member_id: a.member_id,
                member_epoch: a.member_epoch,
                ..Default::default()
            };
        }
        let mut statuses = Vec::new();
        let mut owned = a.owned.clone();
        let mut added = false;
        if a.member_epoch == 0 {
            let Some(topology) = &a.topology else {
                return StreamsHeartbeatResult::error(
                    ErrorCode::InvalidRequest,
                    "Topology must be non-null when (re-)joining.".to_owned(),
                );
            };
            match &self.topology {
                Some(t) if t == topology => {}
                Some(t) if t.epoch > topology.epoch => statuses.push((
                    status::STALE_TOPOLOGY,
                    format!(
                        "The member's topology epoch {} is behind the group's topology epoch {}.",
                        topology.epoch, t.epoch
                    ),
                )),
                Some(_) => {
                    return StreamsHeartbeatResult::error(
                        ErrorCode::InvalidRequest,
                        "Topology updates are not supported yet.".to_owned(),
                    )
                }
                None => {
                    // Checked before anything changes: an invalid topology
                    // leaves no trace.
                    let c = match topology.configure(topics) {
                        Ok(c) => c,
                        Err((code, message)) => {
                            return StreamsHeartbeatResult::error(code, message)
                        }
                    };
                    self.validated_topology_epoch = if c.is_ready() { topology.epoch } else { -1 };
                    self.configured = Some(c);
                    self.topology = Some(topology.clone());
                    *changed = true;
                }
            }
            let first = self.members.is_empty();
            added = !self.members.contains_key(&a.member_id);
            match self.members.get_mut(&a.member_id) {
                // Rejoining (fenced, or its poll timer ran out): it owns
                // nothing now.
                Some(m) => {
                    m.assigned = Tasks::default();
                    m.revoking = Tasks::default();
                    m.revoke_deadline = None;
                    m.active_epochs.clear();
                    m.epoch = 0;
                    m.previous_epoch = -1;
                    m.sent = None;
                    *changed = true;
                }
                None => {
                    if self.members.len() >= self.cfg.size_max {
                        return StreamsHeartbeatResult::error(
                            ErrorCode::GroupMaxSizeReached,
                            format!(
                                "The streams group has reached its maximum capacity of {} members.",
                                self.cfg.size_max
                            ),
                        );
                    }
                    let mut m = blank_member(&a.member_id, now);
                    m.rebalance_timeout =
                        Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64);
                    self.members.insert(a.member_id.clone(), m);
                    self.bump();
                    *changed = true;
                    let delay = a
                        .initial_rebalance_delay
                        .unwrap_or(self.cfg.initial_rebalance_delay);
                    if first && !delay.is_zero() {
                        self.delay_until = Some(now + delay);
                    }
                }
            }
            owned = Some(Tasks::default());
        } else {
            let Some(m) = self.members.get(&a.member_id) else {
                return not_member();
            };
            if a.member_epoch != m.epoch {
                // The answer that moved the member on may have been lost:
                // the previous epoch is fine while it owns nothing new.
                let lost_answer = a.member_epoch == m.previous_epoch
                    && owned.as_ref().is_some_and(|o| o.within(&m.assigned));
                if !lost_answer {
                    return StreamsHeartbeatResult::error(
                        ErrorCode::FencedMemberEpoch,
                        format!(
                            "The streams group member has a member epoch ({}) other than the one known by the group coordinator ({}). The member must abandon all its tasks and rejoin.",
                            a.member_epoch, m.epoch
                        ),
                    );
                }
            }
            if let Some(o) = &owned {
                if let Err(message) = self.check_owned(o) {
                    return StreamsHeartbeatResult::error(ErrorCode::InvalidRequest, message);
                }
                // It owns other than it was last told (an answer lost, or
                // not yet acted on): it is told again.
                let m = self.members.get_mut(&a.member_id).expect("present");
                if m.sent.as_ref() != Some(o) {
                    m.sent = None;
                }
            }
        }
        // The member's own fields: a change is a new group epoch.
        let m = self.members.get_mut(&a.member_id).expect("present");
        let mut moved = false;
        if let Some(p) = &a.process_id {
            moved |= &m.process_id != p;
            m.process_id = p.clone();
        }
        if a.rack_id.is_some() && a.rack_id != m.rack_id {
            m.rack_id = a.rack_id.clone();
            moved = true;
        }
        if let Some(t) = &a.client_tags {
            moved |= &m.client_tags != t;
            m.client_tags = t.clone();
        }
        if a.member_epoch == 0 || a.user_endpoint.is_some() {
            moved |= m.user_endpoint != a.user_endpoint;
            m.user_endpoint = a.user_endpoint.clone();
        }
        if let Some(t) = &a.topology {
            m.topology_epoch = t.epoch;
        }
        if a.rebalance_timeout_ms > 0 {
            m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
        }
        m.client_id = a.client_id.clone();
        m.client_host = a.client_host.clone();
        m.session_deadline = now + a.session_timeout.unwrap_or(self.cfg.session_timeout);
        if moved && !added {
            self.bump();
        }
        *changed |= moved;
        let standbys = a.standby_replicas.unwrap_or(self.cfg.standby_replicas);
        if self.standby_replicas != standbys {
            // A new number of standbys is a new assignment.
            self.standby_replicas = standbys;
            self.bump();
            *changed = true;
        }
        if a.shutdown_application && self.shutdown_requested_by.is_none() {
            self.shutdown_requested_by = Some(a.member_id.clone());
            *changed = true;
        }
        let (group_epoch, assignment_epoch) = (self.group_epoch, self.assignment_epoch);
        self.maybe_assign(topics);
        *changed |= self.group_epoch != group_epoch || self.assignment_epoch != assignment_epoch;
        self.reconcile(&a.member_id, owned.as_ref(), now, changed);

        if self.delay_until.is_some() {
            statuses.push((
                status::ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.".to_owned(),
            ));
        }
        let mut create = Vec::new();
        if let Some(c) = &self.configured {
            if let Some(p) = &c.problem {
                statuses.push(p.clone());
                // Asked of one member at a time: again only after two
                // heartbeat intervals (Kafka's creation error cache).
                let interval = a.heartbeat_interval.unwrap_or(self.cfg.heartbeat_interval);
                let due = self.create_asked.is_none_or(|t| now >= t + 2 * interval);
                if p.0 == status::MISSING_INTERNAL_TOPICS && due {
                    create = c.create.clone();
                    self.create_asked = Some(now);
                }
            }
        }
        if let Some(who) = &self.shutdown_requested_by {
            statuses.push((
                status::SHUTDOWN_APPLICATION,
                format!("Streams group member {who} encountered a fatal error and requested a shutdown for the entire application."),
            ));
        }
        let m = self.members.get_mut(&a.member_id).expect("present");
        let assignment = (a.member_epoch == 0 || m.sent.as_ref() != Some(&m.assigned))
            .then(|| m.assigned.clone());
        if assignment.is_some() {
            m.sent = assignment.clone();
            if m.user_endpoint.is_some() {
                self.endpoint_epoch += 1;
            }
        }
        let endpoints = (self.endpoint_epoch != a.endpoint_information_epoch)
            .then(|| self.endpoints(&a.member_id));
        let m = &self.members[&a.member_id];
        StreamsHeartbeatResult {
            error: ErrorCode::None,
            error_message: None,
            member_id: a.member_id.clone(),
            member_epoch: m.epoch,
            heartbeat_interval_ms: a
                .heartbeat_interval
                .unwrap_or(self.cfg.heartbeat_interval)
                .as_millis() as i32,
            assignment,
            statuses,
            endpoint_epoch: self.endpoint_epoch,
            endpoints,
            create,
        }
    }

    /// Kafka's check of the tasks a member says it owns, once the topology
    /// runs: known subtopologies, partitions below their task count.
    fn check_owned(&self, owned: &Tasks) -> Result<(), String> {
        let Some(c) = self.configured.as_ref().filter(|c| c.is_ready()) else {
            return Ok(());
        };
        for (s, ps) in owned.active.iter().chain(&owned.standby) {
            let Some(&n) = c.tasks.get(s) else {
                return Err(format!("Subtopology {s} does not exist in the topology."));
            };
            if let Some(p) = ps.iter().find(|&&p| p < 0 || p >= n) {
                return Err(format!(
                    "Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: {n}"
                ));
            }
        }
        Ok(())
    }

    /// Every member's endpoint with its tasks' partitions; `last` comes
    /// last (as Kafka lists them).
    fn endpoints(&self, last: &str) -> Vec<EndpointPartitions> {
        let Some(t) = &self.topology else {
            return Vec::new();
        };
        let partitions = |set: &TaskSet| -> Vec<(String, Vec<i32>)> {
            let mut by_topic: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for (s, ps) in set {
                for topic in t.inputs(s) {
                    by_topic
                        .entry(topic.to_owned())
                        .or_default()
                        .extend(ps.iter().copied());
                }
            }
            by_topic
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect()
        };
        let mut out: Vec<(bool, EndpointPartitions)> = self
            .members
            .values()
            .filter_map(|m| {
                let e = m.user_endpoint.clone()?;
                Some((
                    m.member_id == last,
                    (
                        e,
                        partitions(&m.assigned.active),
                        partitions(&m.assigned.standby),
                    ),
                ))
            })
            .collect();
        out.sort_by_key(|(is_last, _)| *is_last);
        out.into_iter().map(|(_, e)| e).collect()
    }
}
