//! Share-partition states in PostgreSQL (`share_partitions`, migration
//! 12): loaded with their partition's ends, and changed by
//! compare-and-set on `version`, so agents serving consumers of one
//! share-partition at once never both win. The state bytes are the
//! engine's; this module stores them.

use uuid::Uuid;

use crate::{sql, Meta, MetaError};

/// A share-partition's stored state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareRow {
    pub version: i64,
    pub state_epoch: i32,
    pub start_offset: i64,
    pub state: Vec<u8>,
}

/// One asked partition: its log's ends (`None`: no such partition) and
/// the group's state of it (`None`: never consumed by the group).
#[derive(Clone, Debug)]
pub struct ShareLoaded {
    pub topic_id: Uuid,
    pub partition: i32,
    /// (high watermark, log start offset)
    pub ends: Option<(i64, i64)>,
    pub row: Option<ShareRow>,
    /// PostgreSQL's clock (ms since the Unix epoch): every agent's lock
    /// deadlines are on this one clock.
    pub now_ms: i64,
}

/// What a compare-and-set found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareWrite {
    Written,
    /// Another agent changed (or created) the state first: load it again.
    Raced,
    /// No share group has that id (none is stored, or the group is of
    /// another type).
    NoGroup,
}

impl Meta {
    /// The share-partitions `keys` of `group_id`, in the order asked.
    pub async fn share_load(
        &self,
        group_id: String,
        keys: Vec<(Uuid, i32)>,
    ) -> Result<Vec<ShareLoaded>, MetaError> {
        self.run(move |c| async move {
            let topics: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
            let partitions: Vec<i32> = keys.iter().map(|k| k.1).collect();
            let rows = c
                .query(sql::SHARE_LOAD, &[&group_id, &topics, &partitions])
                .await?;
            Ok(rows
                .into_iter()
                .map(|r| {
                    let hw: Option<i64> = r.get(2);
                    let version: Option<i64> = r.get(4);
                    ShareLoaded {
                        topic_id: r.get(0),
                        partition: r.get(1),
                        ends: hw.map(|hw| (hw, r.get(3))),
                        row: version.map(|version| ShareRow {
                            version,
                            state_epoch: r.get(5),
                            start_offset: r.get(6),
                            state: r.get(7),
                        }),
                        now_ms: r.get(8),
                    }
                })
                .collect())
        })
        .await
    }

    /// Writes a share-partition's state if it is still at `version` (`None`:
    /// if it has none yet).
    pub async fn share_write(
        &self,
        group_id: String,
        key: (Uuid, i32),
        version: Option<i64>,
        row: ShareRow,
    ) -> Result<ShareWrite, MetaError> {
        self.run(move |c| async move {
            let n = match version {
                None => {
                    match c
                        .execute(
                            sql::SHARE_INSERT,
                            &[
                                &group_id,
                                &key.0,
                                &key.1,
                                &row.state_epoch,
                                &row.start_offset,
                                &row.state,
                            ],
                        )
                        .await
                    {
                        Err(e)
                            if e.code()
                                == Some(
                                    &tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION,
                                ) =>
                        {
                            return Ok(ShareWrite::NoGroup);
                        }
                        other => other?,
                    }
                }
                Some(v) => {
                    c.execute(
                        sql::SHARE_UPDATE,
                        &[
                            &group_id,
                            &key.0,
                            &key.1,
                            &v,
                            &row.state_epoch,
                            &row.start_offset,
                            &row.state,
                        ],
                    )
                    .await?
                }
            };
            if n == 1 {
                return Ok(ShareWrite::Written);
            }
            if version.is_none() {
                // Not inserted: another agent did first, or no share group
                // has that id.
                let kind: Option<String> = c
                    .query_opt(sql::SHARE_GROUP_TYPE, &[&group_id])
                    .await?
                    .map(|r| r.get(0));
                if kind.as_deref() != Some("share") {
                    return Ok(ShareWrite::NoGroup);
                }
            }
            Ok(ShareWrite::Raced)
        })
        .await
    }

    /// Every share-partition of `group_id`: (topic, partition, state epoch,
    /// start offset).
    pub async fn share_offsets(
        &self,
        group_id: String,
    ) -> Result<Vec<(Uuid, i32, i32, i64)>, MetaError> {
        self.run(move |c| async move {
            let rows = c.query(sql::SHARE_OFFSETS, &[&group_id]).await?;
            Ok(rows
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect())
        })
        .await
    }

    /// Forgets the group's state of partitions; how many went.
    pub async fn share_delete_partitions(
        &self,
        group_id: String,
        keys: Vec<(Uuid, i32)>,
    ) -> Result<u64, MetaError> {
        self.run(move |c| async move {
            let topics: Vec<Uuid> = keys.iter().map(|k| k.0).collect();
            let partitions: Vec<i32> = keys.iter().map(|k| k.1).collect();
            Ok(c.execute(
                sql::SHARE_DELETE_PARTITIONS,
                &[&group_id, &topics, &partitions],
            )
            .await?)
        })
        .await
    }

    /// Forgets the group's state of the topics `topic_ids` (their
    /// consumption starts over from share.auto.offset.reset). Returns how
    /// many share-partitions went.
    pub async fn share_delete_topics(
        &self,
        group_id: String,
        topic_ids: Vec<Uuid>,
    ) -> Result<u64, MetaError> {
        self.run(move |c| async move {
            Ok(
                c.execute(sql::SHARE_DELETE_TOPICS, &[&group_id, &topic_ids])
                    .await?,
            )
        })
        .await
    }
}
