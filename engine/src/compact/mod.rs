//! Log compaction: the latest record per key of a compacted topic's
//! partitions, rewritten into new objects with offsets unchanged.
//!
//! Every agent runs a compactor thread of its own (CPU work — decompressing,
//! hashing, recompressing — off the shards and off the storage and
//! metadata threads). Each round it looks at the partitions of compacted
//! topics it leads (hashed over the live agents, as retention is) and
//! compacts those due, the dirtiest first. A partition is held for a pass
//! through its lease in PostgreSQL (`compaction` row): a pass commits only
//! under the epoch it claimed, so a second agent (a membership change, a
//! paused process) can never commit over it.
//!
//! A pass (see `pass` for the rules):
//! 1. reads the dirty part, from the checkpoint up to the last stable
//!    offset (and before records younger than `min.compaction.lag.ms`),
//!    into the key map, until the map, [`COMPACTION_PASS_DIRTY_BYTES_MAX`]
//!    or [`COMPACTION_PASS_DIRTY_SPANS_MAX`] is full: the pass ends there
//!    and the next one goes on from it;
//! 2. reads the log from its start to that end again, keeping what the
//!    rules keep, and writes the changed runs into new objects;
//! 3. swaps the spans in one PostgreSQL transaction (`Meta::swap_compacted`).
//!
//! It never blocks produce or fetch: it only reads committed spans, below
//! the last stable offset, and writes rows no window commit locks. Readers
//! holding old spans go on reading the old objects, which are deleted only
//! after [`COMPACTED_OBJECT_DELETE_DELAY_MIN`] (at least the agent's
//! file-delete delay). A pass killed before its swap leaves the old spans
//! and objects nobody knows of, which the orphan collector deletes.

mod batch;
mod keymap;
mod pass;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use rutomq_meta::commit::SpanRow;
use rutomq_meta::compact::{Item, PartitionDirt, Swap, SwapOutcome};
use rutomq_meta::{Meta, TopicRecord};
use rutomq_storage::Storage;
use uuid::Uuid;

use crate::limits::{
    COMPACTED_OBJECT_BYTES_MAX, COMPACTED_OBJECT_DELETE_DELAY_MIN, COMPACTION_ABORTS_MAX,
    COMPACTION_GAUGED_PARTITIONS_MAX, COMPACTION_ITEMS_PER_QUERY, COMPACTION_LEASE,
    COMPACTION_PASS_DIRTY_BYTES_MAX, COMPACTION_PASS_DIRTY_SPANS_MAX,
};
use crate::metrics::CompactionStats;
use crate::read::read_span;
use crate::topics::{compaction_config, is_compacted, CompactionConfig};
use keymap::KeyMap;
use pass::{Aborts, PassRules, Rewriter, Run};

#[derive(Clone, Copy, Debug)]
pub struct CompactConfig {
    /// Time between rounds (Kafka's `log.cleaner.backoff.ms`).
    pub interval: Duration,
    /// Memory of the key map (Kafka's `log.cleaner.dedupe.buffer.size`).
    pub key_map_bytes: usize,
    /// The agent's file-delete delay.
    pub delete_delay: Duration,
    /// Objects uploaded longer ago than this are not committed (the orphan
    /// collector may be deleting them).
    pub commit_age_max: Duration,
    /// Testing only: a pass waits this long before its swap.
    pub swap_delay: Duration,
}

/// Whether this agent compacts a partition.
pub type PartitionOwner = Box<dyn Fn(Uuid, i32) -> bool + Send + Sync>;

/// Feeds arbitrary bytes, as if read from a stored object, through what a
/// pass does with a batch: take it apart, read every record, rebuild it
/// with every other record and as an empty header, and take the rebuilt
/// batch apart again. For fuzzers; it must never panic or abort (a
/// corrupt object fails its pass, nothing else).
pub fn fuzz_stored_batch(data: &[u8]) {
    let Ok(d) = batch::Decoded::new(data, 1000) else {
        return;
    };
    for i in 0..d.len() {
        let _ = d.record(i);
    }
    let keep: Vec<bool> = (0..d.len()).map(|i| i % 2 == 0).collect();
    if let Ok(out) = d.rebuild(&keep, Some(i64::MAX)) {
        let again = batch::Decoded::new(&out, 1000).expect("a rebuilt batch decodes");
        assert_eq!(again.len(), keep.iter().filter(|&&k| k).count());
    }
    let _ = batch::empty_header(&d.header, 1000);
}

/// Fuzzing entry (`fuzz_targets/stored_batch.rs`, before a compaction pass
/// gets them): the same stored bytes, read back in two chunks cut anywhere
/// (read blocks), walk as in one buffer — the same batches or the same
/// refusal, never a panic.
pub fn fuzz_stored_chunks(data: &[u8]) {
    use crate::records::{walk_batch_chunks, walk_batches};
    let all = bytes::Bytes::copy_from_slice(data);
    let cut = data.first().map_or(0, |&b| b as usize * 7) % (data.len() + 1);
    let one: Vec<_> = walk_batches(all.clone(), true)
        .map(|b| b.map(|b| b.bytes))
        .collect();
    let two: Vec<_> = walk_batch_chunks(vec![all.slice(..cut), all.slice(cut..)], true)
        .map(|b| b.map(|b| b.bytes))
        .collect();
    assert_eq!(one.len(), two.len());
    for (a, b) in one.iter().zip(&two) {
        assert_eq!(a.as_ref().ok(), b.as_ref().ok());
    }
}

/// Starts the compactor thread.
pub fn start(
    meta: Meta,
    storage: Storage,
    agent_id: i32,
    cfg: CompactConfig,
    owns: PartitionOwner,
    stats: Arc<CompactionStats>,
    dynamic: Arc<crate::dynamic::Dynamic>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rutomq-compactor".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the compactor");
                    return;
                }
            };
            let mut c = Compactor {
                meta,
                storage,
                agent_id,
                cfg,
                owns,
                stats,
                dynamic,
                map: None,
            };
            rt.block_on(c.run());
        })
}

struct Compactor {
    meta: Meta,
    storage: Storage,
    agent_id: i32,
    cfg: CompactConfig,
    owns: PartitionOwner,
    stats: Arc<CompactionStats>,
    /// The cluster's topic config defaults come from here.
    dynamic: Arc<crate::dynamic::Dynamic>,
    /// Allocated at the first pass, kept.
    map: Option<KeyMap>,
}

/// A partition due for a pass.
struct Due {
    topic: TopicRecord,
    cfg: CompactionConfig,
    dirt: PartitionDirt,
    ratio: f64,
}

impl Compactor {
    async fn run(&mut self) {
        loop {
            tokio::time::sleep(self.cfg.interval).await;
            // A round that panics (a bug) must not end compaction.
            match std::panic::AssertUnwindSafe(self.round())
                .catch_unwind()
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "compaction round failed"),
                Err(_) => tracing::error!("a compaction round panicked; the next one starts over"),
            }
        }
    }

    async fn round(&mut self) -> anyhow::Result<()> {
        let now = crate::wall::now_ms();
        let mut due = Vec::new();
        let mut gauges = HashMap::new();
        let configs = self.dynamic.copy.get();
        let defaults = configs.topic_defaults();
        for topic in self.meta.load_topics(None).await? {
            if !is_compacted(&topic, defaults) {
                continue;
            }
            let cfg = compaction_config(&topic, defaults);
            for dirt in self
                .meta
                .compaction_dirt(topic.topic_id, self.agent_id)
                .await?
            {
                if !(self.owns)(topic.topic_id, dirt.partition) || dirt.leased_elsewhere {
                    continue;
                }
                let ratio = if dirt.retained_bytes > 0 {
                    (dirt.dirty_bytes as f64 / dirt.retained_bytes as f64).min(1.0)
                } else {
                    0.0
                };
                let lag = dirt.first_dirty_timestamp.map_or(0, |ts| (now - ts).max(0));
                if gauges.len() < COMPACTION_GAUGED_PARTITIONS_MAX {
                    gauges.insert((topic.name.clone(), dirt.partition), (ratio, lag));
                }
                let dirty = dirt.dirty_bytes > 0;
                let horizon_due = dirt.next_horizon_ms.is_some_and(|h| h <= now);
                if (dirty && (ratio > cfg.min_dirty_ratio || lag > cfg.max_lag_ms)) || horizon_due {
                    due.push(Due {
                        topic: topic.clone(),
                        cfg,
                        dirt,
                        ratio,
                    });
                }
            }
        }
        *self.stats.partitions.lock().expect("stats lock") = gauges;
        due.sort_by(|a, b| b.ratio.total_cmp(&a.ratio));
        for d in due {
            let (name, partition) = (d.topic.name.clone(), d.dirt.partition);
            match self.pass(&d).await {
                Ok(()) => {}
                Err(e) => {
                    self.stats.passes_failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(topic = name, partition, error = %e, "compaction pass failed");
                }
            }
        }
        Ok(())
    }

    /// One pass over a partition.
    async fn pass(&mut self, d: &Due) -> anyhow::Result<()> {
        let (topic_id, partition) = (d.topic.topic_id, d.dirt.partition);
        let now_ms = crate::wall::now_ms();
        let Some((epoch, _)) = self
            .meta
            .claim_compaction(topic_id, partition, self.agent_id, COMPACTION_LEASE)
            .await?
        else {
            return Ok(()); // another agent holds it
        };
        let started = Instant::now();
        let mut end_limit = d.dirt.last_stable_offset;
        let mut aborted = self
            .meta
            .compaction_aborted(topic_id, partition, end_limit, COMPACTION_ABORTS_MAX)
            .await?;
        if aborted.len() > COMPACTION_ABORTS_MAX as usize {
            end_limit = aborted[COMPACTION_ABORTS_MAX as usize].first_offset;
            aborted.truncate(COMPACTION_ABORTS_MAX as usize);
        }
        let aborts = Aborts::new(&aborted);
        let young = (d.cfg.min_lag_ms > 0).then(|| now_ms.saturating_sub(d.cfg.min_lag_ms));
        let key_map_bytes = self.cfg.key_map_bytes;
        let map = self
            .map
            .get_or_insert_with(|| KeyMap::with_memory(key_map_bytes));
        map.clear();

        // 1. The key map, over the dirty part.
        let dirty_from = d.dirt.dirty_from;
        let mut end = dirty_from;
        let (mut from, mut indexed_bytes, mut indexed_spans) = (dirty_from, 0u64, 0usize);
        'index: loop {
            let items = self
                .meta
                .compaction_items(
                    topic_id,
                    partition,
                    from,
                    end_limit,
                    COMPACTION_ITEMS_PER_QUERY,
                )
                .await?;
            for item in &items {
                if item.last_offset() >= end_limit {
                    break 'index; // holds or passes the last stable offset
                }
                if let Item::Span(s) = item {
                    let young = young.is_some_and(|t| s.max_timestamp > t);
                    if young
                        || indexed_bytes >= COMPACTION_PASS_DIRTY_BYTES_MAX
                        || indexed_spans >= COMPACTION_PASS_DIRTY_SPANS_MAX
                    {
                        break 'index;
                    }
                    // Checked here whatever --read-verify-crc says: a pass
                    // carries the batches it keeps into new objects.
                    let batches = read_span(&self.storage, s, true)
                        .await
                        .map_err(|e| anyhow::anyhow!("reading a span failed: {e:?}"))?;
                    if pass::record_count(&batches) > map.room() {
                        if map.len() == 0 {
                            anyhow::bail!(
                                "the key map ({} keys, --compaction-key-map-bytes) cannot hold one span's records",
                                map.capacity()
                            );
                        }
                        break 'index;
                    }
                    pass::index(map, &aborts, &batches).map_err(corrupt)?;
                    indexed_bytes += s.byte_len as u64;
                    indexed_spans += 1;
                }
                end = item.last_offset() + 1;
                from = end;
            }
            if (items.len() as i64) < COMPACTION_ITEMS_PER_QUERY {
                break;
            }
        }
        let horizon_due = d.dirt.next_horizon_ms.is_some_and(|h| h <= now_ms);
        if end <= dirty_from && !horizon_due {
            return Ok(()); // nothing cleanable yet (the lease runs out)
        }

        // 2. The log up to `end`, rewritten.
        let rules = PassRules {
            now_ms,
            delete_retention_ms: d.cfg.delete_retention_ms,
            end,
        };
        let mut w = Rewriter::new(rules, map, &aborts);
        let mut out = Output {
            topic_id,
            partition,
            ..Output::default()
        };
        let mut from = d.dirt.log_start_offset;
        loop {
            let items = self
                .meta
                .compaction_items(topic_id, partition, from, end, COMPACTION_ITEMS_PER_QUERY)
                .await?;
            for item in &items {
                match item {
                    Item::Span(s) => {
                        let batches = read_span(&self.storage, s, true)
                            .await
                            .map_err(|e| anyhow::anyhow!("reading a span failed: {e:?}"))?;
                        w.span(s, &batches).map_err(corrupt)?;
                    }
                    Item::Marker(m) => w.marker(m),
                }
                for run in w.runs.drain(..) {
                    out.add(run, &self.storage, self.agent_id).await?;
                }
                from = item.last_offset() + 1;
            }
            if (items.len() as i64) < COMPACTION_ITEMS_PER_QUERY {
                break;
            }
        }
        w.finish();
        for run in w.runs.drain(..) {
            out.add(run, &self.storage, self.agent_id).await?;
        }
        out.upload(&self.storage).await?;
        if !self.cfg.swap_delay.is_zero() {
            tokio::time::sleep(self.cfg.swap_delay).await;
        }
        if started.elapsed() > self.cfg.commit_age_max.min(COMPACTION_LEASE) {
            out.discard(&self.storage).await;
            anyhow::bail!(
                "the pass took {:?}, longer than an upload may wait for its commit",
                started.elapsed()
            );
        }

        // 3. The swap.
        let stats = w.stats;
        let swap = Swap {
            topic_id,
            partition,
            agent_id: self.agent_id,
            epoch,
            objects: out.objects.clone(),
            replaced: std::mem::take(&mut w.replaced),
            spans: std::mem::take(&mut out.spans),
            markers_removed: std::mem::take(&mut w.markers_removed),
            markers_stamped: std::mem::take(&mut w.markers_stamped),
            cleaned_to: end,
            next_horizon_ms: w.next_horizon,
            now_ms,
            delete_delay: self.cfg.delete_delay.max(COMPACTED_OBJECT_DELETE_DELAY_MIN),
        };
        let (replaced, written) = (swap.replaced.len(), swap.spans.len());
        let outcome = match self.meta.swap_compacted(swap).await {
            Ok(o) => o,
            Err(e) => {
                out.discard(&self.storage).await;
                return Err(e.into());
            }
        };
        match outcome {
            SwapOutcome::Done { bytes_removed } => {
                let s = &self.stats;
                let r = Ordering::Relaxed;
                s.passes.fetch_add(1, r);
                s.bytes_read.fetch_add(stats.bytes_read, r);
                s.bytes_written.fetch_add(out.bytes_written, r);
                s.bytes_removed.fetch_add(bytes_removed.max(0) as u64, r);
                s.records_removed.fetch_add(stats.records_removed, r);
                s.markers_removed.fetch_add(stats.markers_removed, r);
                tracing::info!(
                    topic = d.topic.name,
                    partition,
                    dirty_from,
                    cleaned_to = end,
                    bytes_read = stats.bytes_read,
                    bytes_removed,
                    records_read = stats.records_read,
                    records_removed = stats.records_removed,
                    spans_replaced = replaced,
                    spans_written = written,
                    markers_removed = stats.markers_removed,
                    took_ms = started.elapsed().as_millis() as u64,
                    "compacted"
                );
            }
            SwapOutcome::Fenced | SwapOutcome::Changed => {
                out.discard(&self.storage).await;
                self.stats.passes_abandoned.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    topic = d.topic.name,
                    partition,
                    outcome = ?outcome,
                    "compaction pass abandoned; the next round starts over"
                );
            }
        }
        Ok(())
    }
}

/// A stored batch the pass cannot take apart: the partition is left as it
/// is (and the pass retried, logged, every round).
fn corrupt(e: crate::records::Invalid) -> anyhow::Error {
    anyhow::anyhow!("a stored batch cannot be compacted: {}", e.message)
}

/// The objects a pass writes: runs appended to the current one, uploaded
/// past [`COMPACTED_OBJECT_BYTES_MAX`].
#[derive(Default)]
struct Output {
    topic_id: Uuid,
    partition: i32,
    key: Option<String>,
    chunks: Vec<Bytes>,
    len: usize,
    spans: Vec<SpanRow>,
    /// Uploaded objects, with their sizes.
    objects: Vec<(String, i64)>,
    bytes_written: u64,
}

impl Output {
    async fn add(&mut self, run: Run, storage: &Storage, agent_id: i32) -> anyhow::Result<()> {
        let key = self
            .key
            .get_or_insert_with(|| storage.new_object_key(agent_id))
            .clone();
        self.spans.push(SpanRow {
            topic_id: self.topic_id,
            partition: self.partition,
            base_offset: run.base_offset,
            last_offset: run.last_offset,
            object_key: key,
            byte_start: self.len as i64,
            byte_len: run.bytes as i32,
            batch_count: run.batches.len() as i32,
            max_timestamp: run.max_timestamp,
        });
        self.len += run.bytes;
        self.chunks.extend(run.batches);
        if self.len >= COMPACTED_OBJECT_BYTES_MAX {
            self.upload(storage).await?;
        }
        Ok(())
    }

    /// Uploads the current object, if any.
    async fn upload(&mut self, storage: &Storage) -> anyhow::Result<()> {
        let Some(key) = self.key.take() else {
            return Ok(());
        };
        let chunks = std::mem::take(&mut self.chunks);
        let len = std::mem::take(&mut self.len);
        storage.put(key.clone(), chunks).await?;
        self.bytes_written += len as u64;
        self.objects.push((key, len as i64));
        Ok(())
    }

    /// Deletes what was uploaded (the swap did not happen); what fails is
    /// left to the orphan collector.
    async fn discard(&mut self, storage: &Storage) {
        for (key, _) in self.objects.drain(..) {
            if let Err(e) = storage.delete(key.clone()).await {
                tracing::debug!(key, error = %e, "an abandoned compaction object stays for the collector");
            }
        }
    }
}
