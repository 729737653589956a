//! The collector: retention, then the objects no committed span points at.
//!
//! Each round, on every agent:
//! 1. Retention. For every topic, each partition's log start offset moves
//!    past the leading spans that `retention.ms` (newest timestamp too old)
//!    or `retention.bytes` (retained log too large) retire, as Kafka retires
//!    whole segments. Every agent hears of the new log starts (NOTIFY).
//! 2. Spans that end before their partition's log start (retention or
//!    DeleteRecords moved it) are dropped, and the objects they leave with
//!    no span are marked for deletion after `delete_delay` (Kafka's
//!    `file.delete.delay.ms`), so that reads begun before the log start moved
//!    still find their objects. One agent at a time does this.
//! 3. Orphans. Objects whose topic (or every span) went without being marked
//!    are marked too (a full scan, so only every `orphan_every`-th round);
//!    uploads whose commit never happened have no row at all: objects in the
//!    store older than the grace period and unknown to PostgreSQL are first
//!    claimed with a row of their own (so a commit of the same object that
//!    is still in flight fails on the primary key), then deleted. Commits
//!    older than half the grace period are refused as well
//!    (`MetaError::Expired`).
//! 4. Objects whose deletion is due are deleted, then their rows dropped.
//!
//! Every step is idempotent, so agents may run rounds at the same time.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use rutomq_meta::Meta;
use rutomq_storage::Storage;

use crate::limits::{
    GC_DELETE_CHUNK_OBJECTS, GC_DELETE_CHUNK_PACE_MAX, GC_DELETE_SPREAD_FRACTION,
    GC_OBJECTS_PER_ROUND_MAX, GC_STEP_REPEATS_MAX, RETIRED_SPANS_PER_TX_MAX,
};
use crate::topics::{config_i64, is_deleting, TopicDefaults, RETENTION_BYTES, RETENTION_MS};

#[derive(Clone, Copy, Debug)]
pub struct GcConfig {
    /// Time between rounds.
    pub interval: Duration,
    /// Retention is applied every this many rounds.
    pub retention_every: u32,
    /// Unreferenced objects older than this are orphans.
    pub grace: Duration,
    /// Objects retired from the log are deleted this long after.
    pub delete_delay: Duration,
    /// The orphan scans run every this many rounds.
    pub orphan_every: u32,
}

impl GcConfig {
    /// Rounds as often as the more frequent of retention checks and orphan
    /// scans asks; the other runs every so many rounds.
    pub fn new(
        retention_check: Duration,
        orphan_scan: Duration,
        grace: Duration,
        delete_delay: Duration,
    ) -> GcConfig {
        let interval = retention_check
            .min(orphan_scan)
            .max(Duration::from_millis(1));
        let every = |d: Duration| {
            d.as_nanos()
                .div_ceil(interval.as_nanos())
                .clamp(1, u32::MAX as u128) as u32
        };
        GcConfig {
            interval,
            retention_every: every(retention_check),
            grace,
            delete_delay,
            orphan_every: every(orphan_scan),
        }
    }
}

/// Whether this agent applies retention to a topic.
pub type RetentionOwner = Box<dyn Fn(uuid::Uuid) -> bool + Send + Sync>;

pub async fn run(
    meta: Meta,
    storage: Storage,
    cfg: GcConfig,
    owns: RetentionOwner,
    dynamic: std::sync::Arc<crate::dynamic::Dynamic>,
) {
    let mut tick = tokio::time::interval(cfg.interval);
    // A long round is followed by one interval of rest, not by a burst of
    // rounds making up for the ticks it missed.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // Listing resumes where the last round stopped, so a large store is
    // covered over several rounds instead of re-reading its first keys.
    let mut cursor = None;
    let mut round_no: u32 = 0;
    loop {
        tick.tick().await;
        let retention = round_no.is_multiple_of(cfg.retention_every.max(1));
        let orphans = round_no.is_multiple_of(cfg.orphan_every.max(1));
        round_no = round_no.wrapping_add(1);
        // A round that panics (a bug) must not end the collector: retention
        // and deletions would stop silently. It is logged and the next round
        // starts its listing afresh.
        let configs = dynamic.copy.get();
        let outcome = std::panic::AssertUnwindSafe(round(
            &meta,
            &storage,
            &cfg,
            retention.then_some(&*owns),
            configs.topic_defaults(),
            orphans,
            &mut cursor,
        ))
        .catch_unwind()
        .await;
        let Ok(outcome) = outcome else {
            tracing::error!("a collection round panicked; the next round starts over");
            cursor = None;
            continue;
        };
        match outcome {
            Ok(r) if r == Collected::default() => {}
            Ok(r) => tracing::info!(
                log_starts_moved = r.log_starts_moved,
                spans_dropped = r.spans_dropped,
                objects_deleted = r.objects_deleted,
                uncommitted = r.uncommitted,
                "collected"
            ),
            Err(e) => tracing::warn!(error = %e, "collection round failed"),
        }
    }
}

/// What one round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub log_starts_moved: usize,
    pub spans_dropped: u64,
    pub objects_deleted: usize,
    pub uncommitted: usize,
}

/// One round; `retention` adds step 1 for the topics it says yes to (with
/// the cluster's topic config `defaults`), `orphans` the orphan scans.
pub async fn round(
    meta: &Meta,
    storage: &Storage,
    cfg: &GcConfig,
    retention: Option<&(dyn Fn(uuid::Uuid) -> bool + Send + Sync)>,
    defaults: &TopicDefaults,
    orphans: bool,
    cursor: &mut Option<String>,
) -> anyhow::Result<Collected> {
    let mut done = Collected::default();
    if let Some(owns) = retention {
        done.log_starts_moved = apply_retention(meta, owns, defaults).await?;
    }
    for _ in 0..GC_STEP_REPEATS_MAX {
        let Some((dropped, _marked)) = meta
            .drop_retired_spans(RETIRED_SPANS_PER_TX_MAX, cfg.delete_delay)
            .await?
        else {
            break; // another agent is at it
        };
        done.spans_dropped += dropped;
        meta.stats
            .spans_dropped
            .fetch_add(dropped, Ordering::Relaxed);
        if dropped < RETIRED_SPANS_PER_TX_MAX as u64 {
            break;
        }
    }
    if orphans {
        meta.mark_unreferenced_objects(cfg.grace, cfg.delete_delay)
            .await?;
    }
    for _ in 0..GC_STEP_REPEATS_MAX {
        let due = meta
            .objects_to_delete(GC_OBJECTS_PER_ROUND_MAX as i64)
            .await?;
        let n = due.len();
        if n == 0 {
            break;
        }
        // Spread over most of the interval: a burst of deletions (each
        // freeing blocks the writers' allocations wait on) stalled object
        // writes for most of a second. A backlog (a full step) goes
        // unpaced, and so does any pace slower than GC_DELETE_CHUNK_PACE_MAX,
        // so deletion keeps up with any ingest rate.
        let pace = if n == GC_OBJECTS_PER_ROUND_MAX {
            Duration::ZERO
        } else {
            (cfg.interval.mul_f64(GC_DELETE_SPREAD_FRACTION)
                / n.div_ceil(GC_DELETE_CHUNK_OBJECTS) as u32)
                .min(GC_DELETE_CHUNK_PACE_MAX)
        };
        for chunk in due.chunks(GC_DELETE_CHUNK_OBJECTS) {
            let started = tokio::time::Instant::now();
            let (deleted, failed) = storage.delete_many(chunk.to_vec()).await;
            // Rows go only for objects known deleted (a failure leaves the
            // rest marked, for the next round).
            done.objects_deleted += deleted.len();
            meta.forget_objects(deleted).await?;
            if let Some(e) = failed {
                return Err(e.into());
            }
            tokio::time::sleep_until(started + pace).await;
        }
        if n < GC_OBJECTS_PER_ROUND_MAX {
            break;
        }
    }
    if orphans {
        done.uncommitted = collect_uncommitted(meta, storage, cfg.grace, cursor).await?;
    }
    Ok(done)
}

/// Moves log starts as each topic's retention.ms and retention.bytes say
/// (Kafka's defaults where unset), for the topics `owns` says yes to;
/// returns the partitions moved. A topic that fails is logged and left for
/// the next round; the others go on.
pub async fn apply_retention(
    meta: &Meta,
    owns: &(dyn Fn(uuid::Uuid) -> bool + Send + Sync),
    defaults: &TopicDefaults,
) -> anyhow::Result<usize> {
    let now_ms = crate::wall::now_ms();
    let mut moved = 0;
    for topic in meta.load_topics(None).await? {
        // Time and size retention belong to cleanup.policy `delete` (alone
        // or with `compact`); a compact-only topic keeps its history.
        if !owns(topic.topic_id) || !is_deleting(&topic, defaults) {
            continue;
        }
        let ms = config_i64(&topic, defaults, RETENTION_MS).filter(|&v| v >= 0);
        let bytes = config_i64(&topic, defaults, RETENTION_BYTES).filter(|&v| v >= 0);
        if ms.is_none() && bytes.is_none() {
            continue;
        }
        let older_than = ms.map(|ms| now_ms.saturating_sub(ms));
        match retain_topic(meta, topic.topic_id, older_than, bytes).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::debug!(
                    topic = topic.name,
                    partitions = n,
                    "retention moved log starts"
                );
                moved += n;
            }
            Err(e) => tracing::warn!(topic = topic.name, error = %e, "retention of a topic failed"),
        }
    }
    meta.stats
        .log_starts_moved
        .fetch_add(moved as u64, Ordering::Relaxed);
    Ok(moved)
}

/// Applies retention to one topic; returns the partitions moved.
async fn retain_topic(
    meta: &Meta,
    topic_id: uuid::Uuid,
    older_than_ms: Option<i64>,
    retained_bytes: Option<i64>,
) -> Result<usize, rutomq_meta::MetaError> {
    let wanted: Vec<(i32, i64)> = meta
        .retention_starts(topic_id, older_than_ms, retained_bytes)
        .await?
        .into_iter()
        .filter(|&(_, now, wanted)| wanted > now)
        .map(|(p, _, wanted)| (p, wanted))
        .collect();
    if wanted.is_empty() {
        return Ok(0);
    }
    let n = wanted.len();
    meta.advance_log_starts(topic_id, wanted).await?;
    Ok(n)
}

/// Deletes objects in the store that are older than `grace` and that no
/// commit ever recorded; returns how many.
async fn collect_uncommitted(
    meta: &Meta,
    storage: &Storage,
    grace: Duration,
    cursor: &mut Option<String>,
) -> anyhow::Result<usize> {
    let old = storage
        .list_older_than(grace, GC_OBJECTS_PER_ROUND_MAX, cursor.take())
        .await?;
    if old.len() == GC_OBJECTS_PER_ROUND_MAX {
        *cursor = old.last().cloned();
    }
    let mut uncommitted = 0;
    for chunk in old.chunks(1000) {
        // Claimed in PostgreSQL first: a commit of the same object racing
        // with this round fails on the claim instead of pointing at a
        // deleted object. Later rounds drop the claimed rows.
        for key in meta.claim_unknown_objects(chunk.to_vec()).await? {
            storage.delete(key).await?;
            uncommitted += 1;
        }
    }
    Ok(uncommitted)
}
