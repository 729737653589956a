//! Consumer groups in PostgreSQL: the stored form of a group, its committed
//! offsets, and the epoch that fences a coordinator which lost the group.
//!
//! Every statement here is a single statement, so it runs on the shared,
//! pipelined query connection (no transaction, no lock held across calls).

use std::time::Duration;

use uuid::Uuid;

use crate::limits::ORPHANED_GROUPS_MAX;
use crate::{sql, Meta, MetaError};

/// A group as stored: the generation its coordinator last completed (or
/// `Empty`), with each member's metadata for the selected protocol.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredGroup {
    pub group_id: String,
    /// "classic", "consumer", "share" or "streams".
    pub group_type: String,
    pub protocol_type: String,
    pub protocol_name: Option<String>,
    /// The generation (classic) or group epoch (consumer).
    pub generation: i32,
    /// Consumer groups: the epoch of the stored target assignment.
    pub assignment_epoch: i32,
    pub leader_id: Option<String>,
    /// "Empty" or "Stable".
    pub state: String,
    /// When the group entered `state` (ms since the Unix epoch).
    pub state_since_ms: i64,
    pub members: Vec<StoredMember>,
    /// The kind's group-level bytes (a streams group's topology).
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// One committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommit {
    pub topic_id: Uuid,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<Vec<u8>>,
}

/// One committed offset as fetched (by topic name, as clients ask).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<Vec<u8>>,
}

/// A group's consumer lag on one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLag {
    pub group_id: String,
    pub topic: String,
    /// Partitions of the topic the group has committed offsets for.
    pub partitions: i64,
    /// Records between the committed offsets and the high watermarks.
    pub lag: i64,
    /// The largest lag of one partition.
    pub lag_max: i64,
}

/// A row of the group list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub group_type: String,
    pub protocol_type: String,
    pub state: String,
}

impl Meta {
    /// Takes over `group_id` for `agent_id`: bumps its coordinator epoch and
    /// returns the stored group with that epoch, or `None` if no such group.
    pub async fn claim_group(
        &self,
        group_id: String,
        agent_id: i32,
    ) -> Result<Option<(StoredGroup, i64)>, MetaError> {
        self.run(move |c| async move {
            let Some(r) = c
                .query_opt(sql::CLAIM_GROUP, &[&group_id, &agent_id])
                .await?
            else {
                return Ok(None);
            };
            let member_ids: Vec<String> = r.get(8);
            let instance_ids: Vec<Option<String>> = r.get(9);
            let client_ids: Vec<String> = r.get(10);
            let client_hosts: Vec<String> = r.get(11);
            let sessions: Vec<i32> = r.get(12);
            let rebalances: Vec<i32> = r.get(13);
            let subscriptions: Vec<Vec<u8>> = r.get(14);
            let assignments: Vec<Vec<u8>> = r.get(15);
            let n = member_ids.len();
            if [
                instance_ids.len(),
                client_ids.len(),
                client_hosts.len(),
                sessions.len(),
                rebalances.len(),
                subscriptions.len(),
                assignments.len(),
            ]
            .iter()
            .any(|&l| l != n)
            {
                return Err(MetaError::Invalid(format!(
                    "group {group_id}: member arrays of different lengths"
                )));
            }
            let mut members = Vec::with_capacity(n);
            let mut it = instance_ids
                .into_iter()
                .zip(client_ids)
                .zip(client_hosts)
                .zip(sessions.into_iter().zip(rebalances))
                .zip(subscriptions.into_iter().zip(assignments));
            for member_id in member_ids {
                let ((((instance_id, client_id), client_host), (session, rebalance)), (sub, asg)) =
                    it.next().expect("lengths checked");
                members.push(StoredMember {
                    member_id,
                    instance_id,
                    client_id,
                    client_host,
                    session_timeout_ms: session,
                    rebalance_timeout_ms: rebalance,
                    subscription: sub,
                    assignment: asg,
                });
            }
            Ok(Some((
                StoredGroup {
                    group_id,
                    group_type: r.get(0),
                    protocol_type: r.get(1),
                    protocol_name: r.get(2),
                    generation: r.get(3),
                    leader_id: r.get(4),
                    state: r.get(5),
                    state_since_ms: r.get(6),
                    assignment_epoch: r.get(16),
                    data: r.get(17),
                    members,
                },
                r.get(7),
            )))
        })
        .await
    }

    /// Writes `group` under coordinator `epoch` (0: a group never stored).
    /// Returns the epoch to use from now on, or `None` when the writer is
    /// fenced (another agent took the group over, or it was deleted).
    pub async fn store_group(
        &self,
        group: StoredGroup,
        epoch: i64,
        agent_id: i32,
    ) -> Result<Option<i64>, MetaError> {
        self.run(move |c| async move {
            let g = &group;
            let m = &g.members;
            let member_ids: Vec<&str> = m.iter().map(|x| x.member_id.as_str()).collect();
            let instance_ids: Vec<Option<&str>> =
                m.iter().map(|x| x.instance_id.as_deref()).collect();
            let client_ids: Vec<&str> = m.iter().map(|x| x.client_id.as_str()).collect();
            let client_hosts: Vec<&str> = m.iter().map(|x| x.client_host.as_str()).collect();
            let sessions: Vec<i32> = m.iter().map(|x| x.session_timeout_ms).collect();
            let rebalances: Vec<i32> = m.iter().map(|x| x.rebalance_timeout_ms).collect();
            let subscriptions: Vec<&[u8]> = m.iter().map(|x| x.subscription.as_slice()).collect();
            let assignments: Vec<&[u8]> = m.iter().map(|x| x.assignment.as_slice()).collect();
            let statement = if epoch == 0 {
                sql::STORE_GROUP
            } else {
                sql::UPDATE_GROUP
            };
            let row = c
                .query_opt(
                    statement,
                    &[
                        &g.group_id,
                        &epoch,
                        &g.group_type,
                        &g.protocol_type,
                        &g.protocol_name,
                        &g.generation,
                        &g.leader_id,
                        &g.state,
                        &g.state_since_ms,
                        &agent_id,
                        &member_ids,
                        &instance_ids,
                        &client_ids,
                        &client_hosts,
                        &sessions,
                        &rebalances,
                        &subscriptions,
                        &assignments,
                        &g.assignment_epoch,
                        &g.data,
                    ],
                )
                .await?;
            Ok(row.map(|r| r.get(0)))
        })
        .await
    }

    /// Deletes a group and its offsets under coordinator `epoch`; false when
    /// fenced or already gone.
    pub async fn delete_group(&self, group_id: String, epoch: i64) -> Result<bool, MetaError> {
        self.run(move |c| async move {
            Ok(c.execute(sql::DELETE_GROUP, &[&group_id, &epoch]).await? == 1)
        })
        .await
    }

    /// Commits offsets of `group_id` under coordinator `epoch`. Returns the
    /// (topic, partition) pairs written (the others name no partition), or
    /// `None` when fenced. Each pair may appear once.
    pub async fn commit_offsets(
        &self,
        group_id: String,
        epoch: i64,
        offsets: Vec<OffsetCommit>,
    ) -> Result<Option<Vec<(Uuid, i32)>>, MetaError> {
        self.run(move |c| async move {
            let topics: Vec<Uuid> = offsets.iter().map(|o| o.topic_id).collect();
            let partitions: Vec<i32> = offsets.iter().map(|o| o.partition).collect();
            let values: Vec<i64> = offsets.iter().map(|o| o.offset).collect();
            let epochs: Vec<i32> = offsets.iter().map(|o| o.leader_epoch).collect();
            let metadata: Vec<Option<&[u8]>> =
                offsets.iter().map(|o| o.metadata.as_deref()).collect();
            let rows = c
                .query(
                    sql::COMMIT_OFFSETS,
                    &[
                        &group_id,
                        &epoch,
                        &topics,
                        &partitions,
                        &values,
                        &epochs,
                        &metadata,
                    ],
                )
                .await?;
            if rows.is_empty() && !offsets.is_empty() {
                // Nothing written: fenced, or no partition exists.
                let fenced = c
                    .query_opt(sql::GROUP_EPOCH, &[&group_id, &epoch])
                    .await?
                    .is_none();
                if fenced {
                    return Ok(None);
                }
            }
            Ok(Some(rows.iter().map(|r| (r.get(0), r.get(1))).collect()))
        })
        .await
    }

    /// Committed offsets of `group_id`, of the named topics or of all.
    pub async fn fetch_offsets(
        &self,
        group_id: String,
        topics: Option<Vec<String>>,
    ) -> Result<Vec<CommittedOffset>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::FETCH_OFFSETS, &[&group_id, &topics])
                .await?
                .iter()
                .map(|r| CommittedOffset {
                    topic: r.get(0),
                    partition: r.get(1),
                    offset: r.get(2),
                    leader_epoch: r.get(3),
                    metadata: r.get(4),
                })
                .collect())
        })
        .await
    }

    /// Deletes committed offsets of `group_id` under coordinator `epoch`:
    /// how many were deleted, or `None` when fenced.
    pub async fn delete_offsets(
        &self,
        group_id: String,
        epoch: i64,
        partitions: Vec<(Uuid, i32)>,
    ) -> Result<Option<u64>, MetaError> {
        self.run(move |c| async move {
            let (t, p): (Vec<Uuid>, Vec<i32>) = partitions.into_iter().unzip();
            Ok(
                c.query_opt(sql::DELETE_OFFSETS, &[&group_id, &epoch, &t, &p])
                    .await?
                    .map(|r| r.get::<_, i64>(0) as u64),
            )
        })
        .await
    }

    /// Every stored group.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>, MetaError> {
        self.run(|c| async move {
            Ok(c.query(sql::LIST_GROUPS, &[])
                .await?
                .iter()
                .map(|r| GroupListing {
                    group_id: r.get(0),
                    group_type: r.get(1),
                    protocol_type: r.get(2),
                    state: r.get(3),
                })
                .collect())
        })
        .await
    }

    /// Consumer lag per topic of the groups `keep` accepts (those the
    /// caller coordinates), at most `limit` rows; true when more were left
    /// out. The rows stream: the ones not kept are never held.
    pub async fn group_lags(
        &self,
        limit: usize,
        keep: impl Fn(&str) -> bool + Send + 'static,
    ) -> Result<(Vec<GroupLag>, bool), MetaError> {
        self.run(move |c| async move {
            use futures::TryStreamExt;
            let rows = c
                .query_raw(
                    sql::GROUP_LAGS,
                    std::iter::empty::<&(dyn tokio_postgres::types::ToSql + Sync)>(),
                )
                .await?;
            futures::pin_mut!(rows);
            let mut out = Vec::new();
            while let Some(r) = rows.try_next().await? {
                let group_id: String = r.get(0);
                if !keep(&group_id) {
                    continue;
                }
                if out.len() == limit {
                    return Ok((out, true));
                }
                out.push(GroupLag {
                    group_id,
                    topic: r.get(1),
                    partitions: r.get(2),
                    lag: r.get(3),
                    lag_max: r.get(4),
                });
            }
            Ok((out, false))
        })
        .await
    }

    /// Kafka's offsets retention: expires the offsets of groups empty for
    /// longer than `retention`, then such groups left without offsets.
    /// Returns (offsets expired, groups removed).
    pub async fn expire_groups(&self, retention: Duration) -> Result<(i64, u64), MetaError> {
        self.run(move |c| async move {
            let ms = retention.as_millis().min(i64::MAX as u128) as f64;
            let offsets: i64 = c.query_one(sql::EXPIRE_GROUP_OFFSETS, &[&ms]).await?.get(0);
            let groups = c.execute(sql::EXPIRE_GROUPS, &[&ms]).await?;
            Ok((offsets, groups))
        })
        .await
    }

    /// Non-empty groups last coordinated by an agent other than `agent_id`:
    /// the caller loads those it now coordinates, so their members' sessions
    /// run (and expire) somewhere.
    pub async fn orphaned_groups(&self, agent_id: i32) -> Result<Vec<String>, MetaError> {
        self.run(move |c| async move {
            Ok(
                c.query(sql::ORPHANED_GROUPS, &[&ORPHANED_GROUPS_MAX, &agent_id])
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect(),
            )
        })
        .await
    }
}
