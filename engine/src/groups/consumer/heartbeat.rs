//! ConsumerGroupHeartbeat: members join, change their subscription,
//! report what they own, and leave.

use super::*;

impl ConsumerGroup {
    /// Handles one heartbeat. `changed` is set when the group's durable
    /// state changed (the answer must wait for it to be stored).
    pub fn heartbeat(
        &mut self,
        a: HeartbeatArgs,
        topics: &TopicsView,
        now: Instant,
        changed: &mut bool,
    ) -> HeartbeatResult {
        if let Some(assignor) = &a.server_assignor {
            if !ASSIGNORS.contains(&assignor.as_str()) {
                return HeartbeatResult::error(
                    ErrorCode::UnsupportedAssignor,
                    format!("assignor {assignor} is not supported; use one of {ASSIGNORS:?}"),
                );
            }
        }
        let regex = match a.subscribed_topic_regex.as_deref().map(compile_regex) {
            None => None,
            Some(Ok(r)) => Some(r),
            Some(Err(message)) => {
                return HeartbeatResult::error(ErrorCode::InvalidRegularExpression, message);
            }
        };
        let member_id = match a.member_epoch {
            0 => {
                if a.rebalance_timeout_ms <= 0 {
                    return invalid("RebalanceTimeoutMs must be provided when joining");
                }
                if a.subscribed_topic_names.is_none() && a.subscribed_topic_regex.is_none() {
                    return invalid(
                        "SubscribedTopicNames or SubscribedTopicRegex must be set when joining",
                    );
                }
                let topics_wanted = a.subscribed_topic_names.clone().unwrap_or_default();
                if a.owned.as_ref().is_some_and(|o| count(o) != 0) {
                    return invalid("TopicPartitions must be empty when joining");
                }
                let member_id = if a.member_id.is_empty() {
                    if a.version >= 1 {
                        return invalid("MemberId can't be empty");
                    }
                    Uuid::new_v4().to_string()
                } else {
                    a.member_id.clone()
                };
                if let Err(e) = self.join(&member_id, &a, topics_wanted, now, changed) {
                    return e;
                }
                if let Some(m) = self.members.get_mut(&member_id) {
                    m.regex = regex.flatten();
                    m.principal = Some(a.principal.clone());
                    if let Some((pattern, _)) = &m.regex {
                        tracing::debug!(group = %self.group_id, member = %member_id, %pattern, "member subscribes by regular expression");
                    }
                }
                member_id
            }
            -1 => {
                let Some(m) = self.members.get(&a.member_id) else {
                    return HeartbeatResult::error(ErrorCode::UnknownMemberId, None);
                };
                let id = m.member_id.clone();
                self.remove_member(&id);
                *changed = true;
                return HeartbeatResult {
                    error: ErrorCode::None,
                    error_message: None,
                    member_id: id,
                    member_epoch: -1,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                };
            }
            -2 => {
                let session = a
                    .session_timeout
                    .unwrap_or(self.cfg.consumer_session_timeout);
                let Some(m) = self.members.get_mut(&a.member_id) else {
                    return HeartbeatResult::error(ErrorCode::UnknownMemberId, None);
                };
                if m.instance_id.is_none() {
                    return invalid("only a static member leaves with epoch -2");
                }
                m.away = true;
                m.session_deadline = now + session;
                return HeartbeatResult {
                    error: ErrorCode::None,
                    error_message: None,
                    member_id: a.member_id.clone(),
                    member_epoch: -2,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                };
            }
            epoch => {
                let Some(m) = self.members.get_mut(&a.member_id) else {
                    return HeartbeatResult::error(ErrorCode::UnknownMemberId, None);
                };
                if epoch != m.epoch {
                    // The answer that moved the member on may have been lost:
                    // the previous epoch is fine while it owns nothing new.
                    let lost_answer = epoch == m.previous_epoch
                        && a.owned
                            .as_ref()
                            .is_some_and(|o| minus(o, &m.assigned).is_empty());
                    if !lost_answer {
                        return HeartbeatResult::error(
                            ErrorCode::FencedMemberEpoch,
                            format!("member epoch {epoch} is not the current {}", m.epoch),
                        );
                    }
                }
                if a.rebalance_timeout_ms > 0 {
                    m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
                }
                let mut bump = false;
                if let Some(mut t) = a.subscribed_topic_names.clone() {
                    t.sort();
                    t.dedup();
                    if t != m.subscribed {
                        m.subscribed = t;
                        bump = true;
                    }
                }
                if let Some(r) = regex.clone() {
                    if r.as_ref().map(|x| &x.0) != m.regex.as_ref().map(|x| &x.0) {
                        m.regex = r;
                        bump = true;
                    }
                }
                if a.server_assignor.is_some() && a.server_assignor != m.assignor {
                    m.assignor = a.server_assignor.clone();
                    bump = true;
                }
                // What its regex may match follows who it is.
                if m.principal.as_ref() != Some(&a.principal) {
                    m.principal = Some(a.principal.clone());
                    bump |= m.regex.is_some();
                }
                if bump {
                    self.bump();
                    *changed = true;
                }
                a.member_id.clone()
            }
        };
        let session = a
            .session_timeout
            .unwrap_or(self.cfg.consumer_session_timeout);
        if let Some(m) = self.members.get_mut(&member_id) {
            m.session_deadline = now + session;
            m.away = false;
        }
        // Topic changes come through `maybe_assign` from the coordinator's
        // refresh; a heartbeat recomputes only what its own change moved.
        if self.group_epoch > self.assignment_epoch {
            self.maybe_assign(topics);
        }
        self.reconcile(&member_id, a.owned.as_ref(), now, changed);
        let m = &self.members[&member_id];
        HeartbeatResult {
            error: ErrorCode::None,
            error_message: None,
            member_id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: a
                .heartbeat_interval
                .unwrap_or(self.cfg.consumer_heartbeat_interval)
                .as_millis() as i32,
            assignment: Some(m.assigned.clone()),
        }
    }

    fn join(
        &mut self,
        member_id: &str,
        a: &HeartbeatArgs,
        mut subscribed: Vec<String>,
        now: Instant,
        changed: &mut bool,
    ) -> Result<(), HeartbeatResult> {
        subscribed.sort();
        subscribed.dedup();
        let fresh = |epoch: i32| Member {
            member_id: member_id.to_owned(),
            instance_id: a.instance_id.clone(),
            rack_id: a.rack_id.clone(),
            client_id: a.client_id.clone(),
            client_host: a.client_host.clone(),
            rebalance_timeout: Duration::from_millis(a.rebalance_timeout_ms as u64),
            subscribed: subscribed.clone(),
            regex: None,
            principal: Some(a.principal.clone()),
            assignor: a.server_assignor.clone(),
            epoch,
            previous_epoch: -1,
            assigned: Partitions::new(),
            revoking: Partitions::new(),
            session_deadline: now
                + a.session_timeout
                    .unwrap_or(self.cfg.consumer_session_timeout),
            revoke_deadline: None,
            away: false,
        };
        if let Some(instance) = &a.instance_id {
            let known = self
                .statics
                .get(instance)
                .filter(|id| self.members.contains_key(*id))
                .cloned();
            if known.is_none() {
                // A mapping left by a member that is gone.
                self.statics.remove(instance);
            }
            if let Some(old_id) = known {
                if old_id != member_id && self.members.contains_key(member_id) {
                    return Err(HeartbeatResult::error(
                        ErrorCode::InvalidRequest,
                        format!("member id {member_id} belongs to another member"),
                    ));
                }
                let old = &self.members[&old_id];
                if old_id != member_id && !old.away {
                    return Err(HeartbeatResult::error(
                        ErrorCode::UnreleasedInstanceId,
                        format!("instance id {instance} is in use by another member"),
                    ));
                }
                // A restart: the new member takes the old one's place, epoch
                // and partitions (KIP-848 static membership).
                let Some(mut m) = self.members.remove(&old_id) else {
                    return Err(HeartbeatResult::error(ErrorCode::UnknownMemberId, None));
                };
                let same = m.subscribed == subscribed;
                m.member_id = member_id.to_owned();
                m.client_id = a.client_id.clone();
                m.client_host = a.client_host.clone();
                m.rack_id = a.rack_id.clone();
                m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
                m.subscribed = subscribed;
                m.assignor = a.server_assignor.clone();
                m.away = false;
                if let Some(t) = self.target.remove(&old_id) {
                    self.target.insert(member_id.to_owned(), t);
                }
                self.members.insert(member_id.to_owned(), m);
                self.statics.insert(instance.clone(), member_id.to_owned());
                if !same {
                    self.bump();
                }
                *changed = true;
                return Ok(());
            }
        }
        match self.members.get_mut(member_id) {
            Some(m) => {
                // A member rejoining (after being fenced): it holds nothing.
                m.assigned.clear();
                m.revoking.clear();
                m.epoch = 0;
                m.previous_epoch = -1;
                m.subscribed = subscribed;
                m.assignor = a.server_assignor.clone();
                m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms as u64);
            }
            None => {
                if self.members.len() >= self.cfg.group_size_max {
                    return Err(HeartbeatResult::error(
                        ErrorCode::GroupMaxSizeReached,
                        format!("the group has {} members", self.members.len()),
                    ));
                }
                if let Some(i) = &a.instance_id {
                    self.statics.insert(i.clone(), member_id.to_owned());
                }
                self.members.insert(member_id.to_owned(), fresh(0));
            }
        }
        self.bump();
        *changed = true;
        Ok(())
    }

    pub(super) fn remove_member(&mut self, member_id: &str) {
        if let Some(m) = self.members.remove(member_id) {
            if let Some(i) = &m.instance_id {
                if self.statics.get(i).map(String::as_str) == Some(member_id) {
                    self.statics.remove(i);
                }
            }
            self.target.remove(member_id);
            self.bump();
        }
    }
}
