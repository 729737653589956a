//! The consumer group protocol (KIP-848): the coordinator assigns; the
//! member heartbeats with ConsumerGroupHeartbeat, reporting its subscription
//! and the partitions it owns, and reconciles towards the assignment it is
//! sent. Partitions move one at a time between members: a member gives up
//! the ones taken from it (committing what is acknowledged first) and
//! reports that, and the coordinator hands them to their new owner only
//! then. Commits carry the member epoch (OffsetCommit v9).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use base64::Engine as _;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::consumer_group_heartbeat_response::Assignment;
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{plain, Member, Protocol, Task, Tp, RETRY_PAUSE};
use crate::error::{Error, Result};
use crate::native::conn::Connection;
use crate::native::fetch_metadata;
use crate::settings::RebalanceEvent;

/// Bounds on the heartbeat interval the coordinator asks for.
const HEARTBEAT_EVERY_MIN: Duration = Duration::from_millis(50);
const HEARTBEAT_EVERY_MAX: Duration = Duration::from_secs(60);

/// A member id of the member's own (KIP-1082): a random UUID in Kafka's
/// text form (URL-safe base64, no padding).
fn new_member_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
}

impl Task {
    /// Joins with member epoch 0; the assignment comes in this answer or a
    /// later one.
    pub(super) async fn join_consumer(
        &mut self,
        coordinator: Connection,
        version: i16,
    ) -> Result<()> {
        if version >= 1 && self.member_id.is_empty() {
            self.member_id = new_member_id();
        }
        // A new membership owns nothing.
        self.give_up_assignment(false).await;
        let req = self.consumer_heartbeat(0);
        let resp = coordinator.call_version(&req, version).await?;
        if resp.error_code != 0 {
            if resp.error_code == 25 && version == 0 {
                self.member_id.clear();
            }
            return Err(Error::kafka(
                resp.error_code,
                format!(
                    "ConsumerGroupHeartbeat (join): {}",
                    resp.error_message.as_deref().unwrap_or("")
                ),
            ));
        }
        if let Some(id) = resp.member_id.filter(|id| !id.is_empty()) {
            self.member_id = id.to_string();
        }
        tracing::debug!(member = %self.member_id, epoch = resp.member_epoch, "joined (KIP-848)");
        self.member = Some(Member {
            member_id: self.member_id.clone(),
            generation_id: resp.member_epoch,
            coordinator,
            protocol: Protocol::Consumer(version),
        });
        self.on_answer(
            resp.member_epoch,
            resp.heartbeat_interval_ms,
            resp.assignment,
        )
        .await;
        Ok(())
    }

    /// Takes a successful answer: the member epoch, the heartbeat interval
    /// the coordinator asks for, and a new assignment (reconciled towards
    /// at once; on failure again at the next heartbeat, soon).
    async fn on_answer(&mut self, epoch: i32, interval_ms: i32, assignment: Option<Assignment>) {
        if let Some(m) = &mut self.member {
            m.generation_id = epoch;
        }
        if interval_ms > 0 {
            self.heartbeat_every = Duration::from_millis(interval_ms as u64)
                .clamp(HEARTBEAT_EVERY_MIN, HEARTBEAT_EVERY_MAX);
        }
        self.next_heartbeat = Instant::now() + self.heartbeat_every;
        if let Some(a) = assignment {
            self.pending_target = Some(
                a.topic_partitions
                    .into_iter()
                    .map(|t| (t.topic_id, t.partitions))
                    .collect(),
            );
        }
        if self.pending_target.is_some() {
            if let Err(e) = self.reconcile().await {
                tracing::debug!(error = %e, "reconciling the assignment; trying again");
                self.next_heartbeat = Instant::now() + RETRY_PAUSE;
            }
        }
    }

    /// A heartbeat with the member's whole state: subscription, rebalance
    /// timeout and owned partitions.
    fn consumer_heartbeat(&self, epoch: i32) -> ConsumerGroupHeartbeatRequest {
        let mut owned: std::collections::BTreeMap<uuid::Uuid, Vec<i32>> = Default::default();
        for tp in self.positions.keys() {
            if let Some(t) = self.cluster.topics.get(&*tp.0).filter(|t| !t.id.is_nil()) {
                owned.entry(t.id).or_default().push(tp.1);
            }
        }
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.s.group_id.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(self.s.rebalance_timeout.as_millis() as i32)
            .with_subscribed_topic_names(Some(
                self.topics
                    .iter()
                    .map(|t| TopicName(StrBytes::from_string(t.clone())))
                    .collect(),
            ))
            .with_topic_partitions(Some(
                owned
                    .into_iter()
                    .map(|(id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            ))
    }

    pub(super) async fn heartbeat_consumer(&mut self, version: i16) {
        let Some(m) = &self.member else { return };
        self.next_heartbeat = Instant::now() + self.heartbeat_every;
        let req = self.consumer_heartbeat(m.generation_id);
        let resp = match m.coordinator.call_version(&req, version).await {
            Ok(r) => r,
            Err(e) => {
                // Keep the partitions: the coordinator may only have moved.
                // If the session runs out meanwhile, the answer will say
                // the member was fenced.
                tracing::debug!(error = %e, "heartbeat failed; finding the coordinator again");
                return self.find_coordinator_again().await;
            }
        };
        match resp.error_code {
            0 => {
                self.on_answer(
                    resp.member_epoch,
                    resp.heartbeat_interval_ms,
                    resp.assignment,
                )
                .await
            }
            // The coordinator moved or is loading.
            14..=16 => self.find_coordinator_again().await,
            // Fenced (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH): the
            // partitions are someone else's now; nothing is committed.
            // Join again with epoch 0 (v1 keeps the member id).
            code @ (25 | 110) => {
                tracing::debug!(code, "fenced out of the group; joining again");
                if code == 25 && version == 0 {
                    self.member_id.clear();
                }
                self.give_up_assignment(false).await;
            }
            code => {
                tracing::warn!(
                    code,
                    message = resp.error_message.as_deref().unwrap_or(""),
                    "ConsumerGroupHeartbeat failed; joining again"
                );
                self.give_up_assignment(false).await;
            }
        }
    }

    async fn find_coordinator_again(&mut self) {
        self.next_heartbeat = Instant::now() + RETRY_PAUSE;
        match self.coordinator().await {
            Ok(c) => {
                if let Some(m) = &mut self.member {
                    m.coordinator = c;
                }
            }
            Err(e) => tracing::debug!(error = %e, "finding the coordinator"),
        }
    }

    /// Moves towards the assignment last sent: partitions no longer in it
    /// are given up (after a commit of what is acknowledged), new ones are
    /// taken from their committed offsets; the next heartbeat, sent at
    /// once, reports the result.
    async fn reconcile(&mut self) -> Result<()> {
        let Some(target) = self.pending_target.clone() else {
            return Ok(());
        };
        let mut want = BTreeSet::new();
        let mut unknown = false;
        for refresh in [false, true] {
            if refresh {
                let conn = self.any_conn().await?;
                let resp = fetch_metadata(&conn, &self.topics, false).await?;
                self.cluster.apply(resp);
            }
            want.clear();
            unknown = false;
            for (id, partitions) in &target {
                match self.cluster.names.get(id).cloned() {
                    Some(name) => {
                        let name = self.name(&name);
                        want.extend(partitions.iter().map(|p| (name.clone(), *p)));
                    }
                    None => unknown = true,
                }
            }
            if !unknown {
                break;
            }
        }
        let owned: BTreeSet<Tp> = self.positions.keys().cloned().collect();
        let revoked: Vec<Tp> = owned.difference(&want).cloned().collect();
        let added: Vec<Tp> = want.difference(&owned).cloned().collect();
        if !revoked.is_empty() {
            if let Err(e) = self.commit().await {
                tracing::debug!(error = %e, "commit before giving partitions up failed");
            }
            let mut a = self.acks.lock().expect("acks lock");
            for tp in &revoked {
                a.partitions.remove(tp);
            }
            drop(a);
            for tp in &revoked {
                self.positions.remove(tp);
                self.drop_ready(tp);
                self.paused.remove(tp);
            }
            self.s.tell(RebalanceEvent::Revoked(plain(revoked.iter())));
        }
        if !added.is_empty() {
            let committed = self.committed(&added).await?;
            let mut starts: Vec<(Tp, i64)> = Vec::new();
            let mut missing = Vec::new();
            for tp in &added {
                match committed.get(tp) {
                    Some(&o) if o >= 0 => starts.push((tp.clone(), o)),
                    _ => missing.push(tp.clone()),
                }
            }
            starts.extend(self.reset_offsets(&missing).await?);
            let mut a = self.acks.lock().expect("acks lock");
            for (tp, o) in starts {
                a.take(tp.clone(), o);
                self.positions.insert(tp, o);
            }
            drop(a);
            self.s.tell(RebalanceEvent::Assigned(plain(added.iter())));
        }
        *self.assignment_view.lock().expect("assignment lock") = plain(self.positions.keys());
        if !unknown {
            self.pending_target = None;
        }
        if !revoked.is_empty() || !added.is_empty() {
            tracing::debug!(
                revoked = revoked.len(),
                added = added.len(),
                owned = self.positions.len(),
                "assignment reconciled"
            );
            self.next_heartbeat = Instant::now();
        }
        Ok(())
    }

    /// Leaves with member epoch -1 (the caller committed first).
    pub(super) async fn leave_consumer(&mut self, m: Member, version: i16) {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.s.group_id.clone())))
            .with_member_id(StrBytes::from_string(m.member_id.clone()))
            .with_member_epoch(-1);
        let _ = m.coordinator.call_version(&req, version).await;
    }
}
