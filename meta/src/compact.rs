//! Log compaction's metadata: which partitions are dirty, the per-partition
//! lease that lets one agent at a time compact a partition, what a pass
//! reads, and the swap that makes a pass visible, all in one transaction:
//! the spans it read go, the spans it wrote come, markers it may remove go,
//! markers that wait for their horizon are stamped, the checkpoint moves,
//! and objects left without a span are scheduled for deletion after a delay
//! (readers may still hold the old spans). A pass that lost its lease, or
//! whose spans changed under it, commits nothing.

use std::time::Duration;

use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::{span_from_row, sql, Meta, MetaError, SpanRecord};

/// One partition of a compacted topic, as the compactor picks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionDirt {
    pub partition: i32,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// Bytes of the retained log.
    pub retained_bytes: i64,
    /// Where the dirty part starts (the cleaner checkpoint, at least the
    /// log start).
    pub dirty_from: i64,
    /// Bytes of the spans from `dirty_from` on.
    pub dirty_bytes: i64,
    /// The newest timestamp of the first dirty span.
    pub first_dirty_timestamp: Option<i64>,
    /// The earliest delete horizon the last pass stamped.
    pub next_horizon_ms: Option<i64>,
    /// Another agent holds the lease.
    pub leased_elsewhere: bool,
}

/// A marker as a compaction pass sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerState {
    pub offset: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub timestamp_ms: i64,
    /// An abort that left data: where it began.
    pub first_offset: Option<i64>,
    pub delete_horizon_ms: Option<i64>,
}

/// What a pass reads, in offset order.
#[derive(Clone, Debug)]
pub enum Item {
    Span(SpanRecord),
    Marker(MarkerState),
}

impl Item {
    pub fn last_offset(&self) -> i64 {
        match self {
            Item::Span(s) => s.last_offset,
            Item::Marker(m) => m.offset,
        }
    }
}

/// An aborted transaction with data in the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub marker_offset: i64,
}

/// Everything a pass commits.
#[derive(Clone, Debug, Default)]
pub struct Swap {
    pub topic_id: Uuid,
    pub partition: i32,
    pub agent_id: i32,
    pub epoch: i64,
    /// The objects written, with their sizes.
    pub objects: Vec<(String, i64)>,
    /// Base offsets of the spans replaced.
    pub replaced: Vec<i64>,
    /// The spans written (sparse), in offset order.
    pub spans: Vec<crate::commit::SpanRow>,
    /// Offsets of markers removed (their horizon has passed).
    pub markers_removed: Vec<i64>,
    /// (offset, horizon) of markers that may go from their horizon on.
    pub markers_stamped: Vec<(i64, i64)>,
    pub cleaned_to: i64,
    pub next_horizon_ms: Option<i64>,
    pub now_ms: i64,
    /// Objects left without spans are deleted this long after.
    pub delete_delay: Duration,
}

/// How a swap ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapOutcome {
    /// Committed; the bytes the log shrank by.
    Done { bytes_removed: i64 },
    /// The lease was lost (another agent may be compacting).
    Fenced,
    /// Spans or markers changed under the pass (retention, a topic
    /// deletion): nothing committed, the next pass starts afresh.
    Changed,
}

impl Meta {
    /// The partitions of compacted topic `topic_id`, as agent `agent_id`
    /// picks among them.
    pub async fn compaction_dirt(
        &self,
        topic_id: Uuid,
        agent_id: i32,
    ) -> Result<Vec<PartitionDirt>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::COMPACTION_DIRT, &[&topic_id, &agent_id])
                .await?
                .iter()
                .map(|r| PartitionDirt {
                    partition: r.get(0),
                    log_start_offset: r.get(1),
                    high_watermark: r.get(2),
                    last_stable_offset: r.get(3),
                    retained_bytes: r.get(4),
                    dirty_from: r.get(5),
                    dirty_bytes: r.get(6),
                    first_dirty_timestamp: r.get(7),
                    next_horizon_ms: r.get(8),
                    leased_elsewhere: r.get(9),
                })
                .collect())
        })
        .await
    }

    /// Claims a partition for one pass of at most `lease`; (epoch,
    /// checkpoint), or None when another agent holds it.
    pub async fn claim_compaction(
        &self,
        topic_id: Uuid,
        partition: i32,
        agent_id: i32,
        lease: Duration,
    ) -> Result<Option<(i64, i64)>, MetaError> {
        self.run(move |c| async move {
            let secs = lease.as_secs_f64();
            Ok(c.query_opt(
                sql::CLAIM_COMPACTION,
                &[&topic_id, &partition, &agent_id, &secs],
            )
            .await?
            .map(|r| (r.get(0), r.get(1))))
        })
        .await
    }

    /// Up to `limit` spans and markers from the span holding `from` to
    /// below `to`, in offset order.
    pub async fn compaction_items(
        &self,
        topic_id: Uuid,
        partition: i32,
        from: i64,
        to: i64,
        limit: i64,
    ) -> Result<Vec<Item>, MetaError> {
        self.run(move |c| async move {
            let params: [&(dyn ToSql + Sync); 5] = [&topic_id, &partition, &from, &to, &limit];
            Ok(c.query(sql::COMPACTION_ITEMS, &params)
                .await?
                .iter()
                .map(|r| match r.get::<_, Option<i64>>(9) {
                    Some(producer_id) => Item::Marker(MarkerState {
                        offset: r.get(0),
                        producer_id,
                        producer_epoch: r.get(10),
                        commit: r.get(11),
                        timestamp_ms: r.get(6),
                        first_offset: r.get(12),
                        delete_horizon_ms: r.get(13),
                    }),
                    None => Item::Span(span_from_row(r)),
                })
                .collect())
        })
        .await
    }

    /// The aborted transactions with data that began below `below`, by
    /// first offset, at most `limit` + 1.
    pub async fn compaction_aborted(
        &self,
        topic_id: Uuid,
        partition: i32,
        below: i64,
        limit: i64,
    ) -> Result<Vec<AbortedTxn>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(
                sql::COMPACTION_ABORTED,
                &[&topic_id, &partition, &below, &limit],
            )
            .await?
            .iter()
            .map(|r| AbortedTxn {
                producer_id: r.get(0),
                first_offset: r.get(1),
                marker_offset: r.get(2),
            })
            .collect())
        })
        .await
    }

    /// Commits a pass (see the module comment).
    pub async fn swap_compacted(&self, s: Swap) -> Result<SwapOutcome, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let (t, p) = (s.topic_id, s.partition);
            if tx
                .query_opt(sql::COMPACTION_FENCE, &[&t, &p, &s.agent_id, &s.epoch])
                .await?
                .is_none()
            {
                return Ok(SwapOutcome::Fenced);
            }
            if !s.objects.is_empty() {
                let keys: Vec<&str> = s.objects.iter().map(|o| o.0.as_str()).collect();
                let sizes: Vec<i64> = s.objects.iter().map(|o| o.1).collect();
                let agents = vec![s.agent_id; keys.len()];
                tx.execute(sql::INSERT_OBJECTS, &[&keys, &sizes, &agents])
                    .await?;
            }
            let gone = tx
                .query(sql::COMPACTION_DROP_SPANS, &[&t, &p, &s.replaced])
                .await?;
            if gone.len() != s.replaced.len() {
                return Ok(SwapOutcome::Changed);
            }
            let old_bytes: i64 = gone.iter().map(|r| r.get::<_, i32>(0) as i64).sum();
            let mut old_objects: Vec<String> = gone.iter().map(|r| r.get(1)).collect();
            old_objects.sort_unstable();
            old_objects.dedup();
            let col =
                |f: fn(&crate::commit::SpanRow) -> i64| s.spans.iter().map(f).collect::<Vec<i64>>();
            let keys: Vec<&str> = s.spans.iter().map(|x| x.object_key.as_str()).collect();
            let lens: Vec<i32> = s.spans.iter().map(|x| x.byte_len).collect();
            let counts: Vec<i32> = s.spans.iter().map(|x| x.batch_count).collect();
            let params: [&(dyn ToSql + Sync); 9] = [
                &t,
                &p,
                &col(|x| x.base_offset),
                &col(|x| x.last_offset),
                &keys,
                &col(|x| x.byte_start),
                &lens,
                &counts,
                &col(|x| x.max_timestamp),
            ];
            tx.execute(sql::COMPACTION_INSERT_SPANS, &params).await?;
            let new_bytes: i64 = lens.iter().map(|&l| l as i64).sum();
            if !s.markers_removed.is_empty() {
                let n = tx
                    .execute(
                        sql::COMPACTION_DROP_MARKERS,
                        &[&t, &p, &s.markers_removed, &s.now_ms],
                    )
                    .await?;
                if n as usize != s.markers_removed.len() {
                    return Ok(SwapOutcome::Changed);
                }
            }
            if !s.markers_stamped.is_empty() {
                let offsets: Vec<i64> = s.markers_stamped.iter().map(|m| m.0).collect();
                let horizons: Vec<i64> = s.markers_stamped.iter().map(|m| m.1).collect();
                tx.execute(
                    sql::COMPACTION_STAMP_MARKERS,
                    &[&t, &p, &offsets, &horizons],
                )
                .await?;
            }
            let removed = old_bytes - new_bytes;
            tx.execute(
                sql::COMPACTION_DONE,
                &[
                    &t,
                    &p,
                    &s.cleaned_to,
                    &removed,
                    &s.next_horizon_ms,
                    &s.now_ms,
                ],
            )
            .await?;
            if !old_objects.is_empty() {
                let delay = s.delete_delay.as_secs_f64();
                tx.execute(sql::MARK_RETIRED_OBJECTS, &[&old_objects, &delay])
                    .await?;
            }
            tx.commit().await?;
            ctx.notifier.announce(
                crate::notify::COMPACTED,
                crate::commit::offset_payloads(std::iter::once((t, p, s.cleaned_to))),
            );
            Ok(SwapOutcome::Done {
                bytes_removed: removed,
            })
        })
        .await
    }
}
