//! Per-shard state: the open batch buffer, the topic cache, the known high
//! watermarks and the long-poll waiters. Shared-nothing: `Rc`/`RefCell`,
//! never held across an `.await`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::{mpsc, oneshot};
use futures::future::{FutureExt, Shared};
use futures::StreamExt;
use indexmap::IndexMap;
use rutomq_meta::{BatchRef, ProducerFields, TopicRecord};
use uuid::Uuid;

use crate::agent::{Agent, HubMessage};
use crate::error::ErrorCode;
use crate::pipeline::{Sealed, SealedPart, WindowOutcome};
use crate::records::BatchInfo;

/// Topic metadata cached per shard; refreshed after this long.
pub const TOPIC_CACHE_TTL: Duration = Duration::from_secs(5);
/// A high watermark learned from PostgreSQL or a notification is trusted
/// this long without asking PostgreSQL again.
pub const HW_CACHE_TTL: Duration = Duration::from_secs(5);
/// Partitions whose spans a shard caches (each up to FETCH_SPANS_MAX spans).
pub const SPAN_CACHE_PARTITIONS_MAX: usize = 1024;
/// Spans kept per partition (the oldest half goes when it is full).
pub const SPANS_CACHED_PER_PARTITION_MAX: usize = 256;

/// A cached log start offset is trusted this long: notifications of new
/// log starts can be dropped (full queue, LISTEN reconnecting), and a
/// retired object is deleted only `file.delete.delay.ms` (60 s) later.
pub const LOG_START_CACHE_TTL: Duration = Duration::from_secs(10);

/// A partition's log start offset, the spans last read from it, the
/// offset the next span must start at to extend them, and when the log
/// start was read from PostgreSQL.
type CachedSpans = (i64, Vec<rutomq_meta::SpanRecord>, i64, Instant);
/// Topics cached per shard at most.
pub const TOPIC_CACHE_ENTRIES_MAX: usize = 100_000;
/// Long-poll waiter list length at which finished waiters are pruned.
pub const WAITERS_PRUNE_AT: usize = 1024;
/// Record bytes all fetches of one shard may hold while assembling
/// responses; past it fetches answer with less (or no) data.
pub const FETCH_BYTES_INFLIGHT_MAX: usize = 256 << 20;

/// Fetch bytes reserved from the shard's budget; returned on drop.
pub struct FetchGrant {
    shard: Rc<Shard>,
    pub bytes: usize,
}

impl FetchGrant {
    /// Returns what was reserved beyond `used` to the shard.
    pub fn shrink_to(&mut self, used: usize) {
        if used < self.bytes {
            let b = &self.shard.fetch_bytes_free;
            b.set(b.get() + self.bytes - used);
            self.bytes = used;
        }
    }
}

impl Drop for FetchGrant {
    fn drop(&mut self) {
        let b = &self.shard.fetch_bytes_free;
        b.set(b.get() + self.bytes);
    }
}

/// The outcome of a buffer, awaited by every produce request in it.
pub type BufferDone = Shared<oneshot::Receiver<WindowOutcome>>;

struct OpenBuffer {
    generation: u64,
    parts: IndexMap<(Uuid, i32), SealedPart>,
    part_bytes: Vec<u64>,
    bytes: usize,
    reply: oneshot::Sender<WindowOutcome>,
    done: BufferDone,
    /// The grid window this buffer is announced for (see
    /// [`crate::agent::Agent::announce_window`]), once its timer is armed.
    window: Option<u64>,
}

impl OpenBuffer {
    fn new(generation: u64) -> Self {
        let (reply, rx) = oneshot::channel();
        OpenBuffer {
            generation,
            parts: IndexMap::new(),
            part_bytes: Vec::new(),
            bytes: 0,
            reply,
            done: rx.shared(),
            window: None,
        }
    }
}

pub struct Shard {
    pub index: usize,
    pub agent: Arc<Agent>,
    topics: RefCell<HashMap<String, (TopicRecord, Instant)>>,
    /// Topic id → name of the entries in `topics`.
    topic_names: RefCell<HashMap<Uuid, String>>,
    buffer: RefCell<OpenBuffer>,
    hw: RefCell<HashMap<(Uuid, i32), (i64, Instant)>>,
    /// Committed spans last read per partition, with the log start offset.
    /// Spans never change once committed, so a consumer reading on is
    /// served from here instead of asking PostgreSQL on every fetch.
    spans: RefCell<HashMap<(Uuid, i32), CachedSpans>>,
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
    seal_tx: mpsc::UnboundedSender<Sealed>,
    fetch_bytes_free: std::cell::Cell<usize>,
    pub metrics: Arc<crate::metrics::ShardMetrics>,
}

impl Shard {
    pub fn new(
        index: usize,
        agent: Arc<Agent>,
        hub_rx: async_channel::Receiver<HubMessage>,
    ) -> Rc<Shard> {
        let (seal_tx, mut seal_rx) = mpsc::unbounded::<Sealed>();
        let shard = Rc::new(Shard {
            index,
            agent: agent.clone(),
            topics: RefCell::new(HashMap::new()),
            topic_names: RefCell::new(HashMap::new()),
            buffer: RefCell::new(OpenBuffer::new(0)),
            hw: RefCell::new(HashMap::new()),
            spans: RefCell::new(HashMap::new()),
            waiters: RefCell::new(Vec::new()),
            seal_tx,
            fetch_bytes_free: std::cell::Cell::new(FETCH_BYTES_INFLIGHT_MAX),
            metrics: Arc::new(crate::metrics::ShardMetrics::default()),
        });
        agent
            .shard_metrics
            .lock()
            .expect("metrics lock")
            .push(shard.metrics.clone());
        // Forward sealed buffers in seal order; a full pipeline queue holds
        // them here, and the shard's memory budget stops the sockets.
        let sealed_tx = agent.sealed_tx.clone();
        rutomq_shards::spawn(async move {
            while let Some(s) = seal_rx.next().await {
                if let Err(e) = sealed_tx.send(s).await {
                    let _ = e.0.reply.send(Err(ErrorCode::KafkaStorageError));
                }
            }
        });
        let weak = Rc::downgrade(&shard);
        rutomq_shards::spawn(async move {
            while let Ok(msg) = hub_rx.recv().await {
                let Some(shard) = weak.upgrade() else { break };
                shard.learn_spans(&msg.spans);
                shard.learn_watermarks(&msg.marks);
                shard.learn_log_starts(&msg.log_starts);
            }
        });
        shard
    }

    fn learn_watermarks(&self, marks: &[(Uuid, i32, i64)]) {
        let now = Instant::now();
        {
            let mut hw = self.hw.borrow_mut();
            for &(t, p, w) in marks {
                let e = hw.entry((t, p)).or_insert((w, now));
                if w >= e.0 {
                    *e = (w, now);
                }
            }
        }
        for w in self.waiters.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    /// Records a high watermark read from PostgreSQL.
    pub fn set_watermark(&self, topic_id: Uuid, partition: i32, hw: i64) {
        self.learn_hw_only(topic_id, partition, hw);
    }

    fn learn_hw_only(&self, topic_id: Uuid, partition: i32, hw: i64) {
        let mut map = self.hw.borrow_mut();
        let e = map
            .entry((topic_id, partition))
            .or_insert((hw, Instant::now()));
        if hw >= e.0 {
            *e = (hw, Instant::now());
        }
    }

    /// A recent high watermark, if one is known.
    /// Cached spans from the one holding `from`: when they hold at least
    /// `bytes_max` bytes or reach the high watermark `hw`. Returns the log
    /// start offset too.
    pub fn cached_spans(
        &self,
        topic_id: Uuid,
        partition: i32,
        from: i64,
        hw: i64,
        bytes_max: usize,
    ) -> Option<(i64, Vec<rutomq_meta::SpanRecord>)> {
        let map = self.spans.borrow();
        let (log_start, spans, _, read_at) = map.get(&(topic_id, partition))?;
        if read_at.elapsed() >= LOG_START_CACHE_TTL {
            return None;
        }
        // Sorted by offset: the first span ending at or after `from`.
        let first = spans.partition_point(|s| s.last_offset < from);
        if spans.get(first)?.base_offset > from || from < *log_start {
            return None;
        }
        let mut bytes = 0usize;
        for (i, s) in spans.iter().enumerate().skip(first) {
            bytes += s.byte_len as usize;
            if bytes >= bytes_max || s.last_offset + 1 >= hw {
                // Enough, plus what follows for read-ahead.
                let end = (i + 1 + crate::read::READ_AHEAD_SPANS).min(spans.len());
                return Some((*log_start, spans[first..end].to_vec()));
            }
        }
        None
    }

    /// Extends cached span lists with spans this agent just committed, when
    /// they continue them (a gap means another agent wrote in between: the
    /// next read asks PostgreSQL and refreshes the list).
    fn learn_spans(&self, spans: &[crate::pipeline::NewSpan]) {
        let mut map = self.spans.borrow_mut();
        for (tp, span) in spans {
            let Some((_, list, next, _)) = map.get_mut(tp) else {
                continue;
            };
            if *next == span.base_offset {
                if list.len() >= SPANS_CACHED_PER_PARTITION_MAX {
                    list.drain(..list.len() / 2);
                }
                list.push(span.clone());
                *next = span.last_offset + 1;
            }
        }
    }

    /// Remembers the spans just read for a partition from offset `from`,
    /// by a query sent at `asked_at`. A log start learned meanwhile (a
    /// notification overtaking the query) is kept: log starts only grow.
    pub fn cache_spans(
        &self,
        topic_id: Uuid,
        partition: i32,
        log_start: i64,
        from: i64,
        spans: &[rutomq_meta::SpanRecord],
        asked_at: Instant,
    ) {
        let next = spans.last().map_or(from, |l| l.last_offset + 1);
        let mut map = self.spans.borrow_mut();
        if map.len() >= SPAN_CACHE_PARTITIONS_MAX && !map.contains_key(&(topic_id, partition)) {
            map.clear();
        }
        let known = map
            .get(&(topic_id, partition))
            .map_or(log_start, |c| c.0.max(log_start));
        let kept: Vec<_> = spans
            .iter()
            .filter(|s| s.last_offset >= known)
            .cloned()
            .collect();
        map.insert((topic_id, partition), (known, kept, next, asked_at));
    }

    /// Log starts moved by retention or DeleteRecords: cached spans before
    /// them are forgotten, and fetches below them get OFFSET_OUT_OF_RANGE.
    fn learn_log_starts(&self, log_starts: &[(Uuid, i32, i64)]) {
        let mut map = self.spans.borrow_mut();
        for &(t, p, start) in log_starts {
            if let Some((log_start, list, _, _)) = map.get_mut(&(t, p)) {
                if start > *log_start {
                    *log_start = start;
                    list.retain(|s| s.last_offset >= start);
                }
            }
        }
    }

    pub fn known_watermark(&self, topic_id: Uuid, partition: i32) -> Option<i64> {
        self.hw
            .borrow()
            .get(&(topic_id, partition))
            .filter(|(_, at)| at.elapsed() < HW_CACHE_TTL)
            .map(|(w, _)| *w)
    }

    /// Reserves up to `want` bytes of the shard's fetch budget.
    pub fn reserve_fetch_bytes(self: &Rc<Self>, want: usize) -> FetchGrant {
        let free = self.fetch_bytes_free.get();
        let bytes = want.min(free);
        self.fetch_bytes_free.set(free - bytes);
        FetchGrant {
            shard: self.clone(),
            bytes,
        }
    }

    /// Resolves once any high watermark changes (or the waiter is dropped).
    pub fn watermark_changed(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.waiters.borrow_mut();
        // Finished long polls leave their senders behind until the next
        // change; on an idle cluster that could grow without end.
        if waiters.len() >= WAITERS_PRUNE_AT {
            waiters.retain(|w| !w.is_canceled());
        }
        waiters.push(tx);
        rx
    }

    pub async fn topic_by_name(&self, name: &str) -> Result<Option<TopicRecord>, ErrorCode> {
        if let Some((t, at)) = self.topics.borrow().get(name) {
            if at.elapsed() < TOPIC_CACHE_TTL {
                return Ok(Some(t.clone()));
            }
        }
        let found = self
            .agent
            .meta
            .load_topics(Some(vec![name.to_owned()]))
            .await
            .map_err(|e| ErrorCode::from(&e))?;
        Ok(self.remember(found.into_iter().next(), name))
    }

    pub async fn topic_by_id(&self, topic_id: Uuid) -> Result<Option<TopicRecord>, ErrorCode> {
        // Fetch and Produce v13+ name topics by id: one map lookup each,
        // not a scan of the cache.
        let cached = self.topic_names.borrow().get(&topic_id).and_then(|name| {
            self.topics
                .borrow()
                .get(name)
                .filter(|(t, at)| t.topic_id == topic_id && at.elapsed() < TOPIC_CACHE_TTL)
                .map(|(t, _)| t.clone())
        });
        if cached.is_some() {
            return Ok(cached);
        }
        let found = self
            .agent
            .meta
            .load_topic_by_id(topic_id)
            .await
            .map_err(|e| ErrorCode::from(&e))?;
        let name = found.as_ref().map(|t| t.name.clone()).unwrap_or_default();
        Ok(self.remember(found, &name))
    }

    fn remember(&self, topic: Option<TopicRecord>, name: &str) -> Option<TopicRecord> {
        let mut cache = self.topics.borrow_mut();
        match &topic {
            Some(t) => {
                if cache.len() >= TOPIC_CACHE_ENTRIES_MAX {
                    cache.retain(|_, (_, at)| at.elapsed() < TOPIC_CACHE_TTL);
                    if cache.len() >= TOPIC_CACHE_ENTRIES_MAX {
                        cache.clear();
                    }
                    self.topic_names
                        .borrow_mut()
                        .retain(|_, n| cache.contains_key(n));
                }
                let mut names = self.topic_names.borrow_mut();
                if let Some((old, _)) = cache.insert(t.name.clone(), (t.clone(), Instant::now())) {
                    names.remove(&old.topic_id);
                }
                names.insert(t.topic_id, t.name.clone());
            }
            None => {
                drop(cache);
                self.forget_topic(name);
            }
        }
        topic
    }

    pub fn forget_topic(&self, name: &str) {
        if let Some((old, _)) = self.topics.borrow_mut().remove(name) {
            self.topic_names.borrow_mut().remove(&old.topic_id);
        }
    }

    /// Appends a validated batch to the open buffer. Returns the buffer's
    /// outcome future and the (part, batch) position whose outcome is ours.
    pub fn append(
        self: &Rc<Self>,
        topic_id: Uuid,
        partition: i32,
        bytes: Bytes,
        info: &BatchInfo,
    ) -> (BufferDone, usize, usize) {
        let (done, part_idx, batch_idx, seal_now, first) = {
            let mut buf = self.buffer.borrow_mut();
            let first = buf.bytes == 0;
            let len = bytes.len();
            let part_idx = {
                let entry = buf.parts.entry((topic_id, partition));
                let idx = entry.index();
                entry.or_insert_with(|| SealedPart {
                    topic_id,
                    partition,
                    chunks: Vec::new(),
                    batches: Vec::new(),
                });
                idx
            };
            if buf.part_bytes.len() <= part_idx {
                buf.part_bytes.resize(part_idx + 1, 0);
            }
            let start = buf.part_bytes[part_idx];
            buf.part_bytes[part_idx] += len as u64;
            let part = buf.parts.get_index_mut(part_idx).expect("present").1;
            let batch_idx = part.batches.len();
            part.batches.push(BatchRef {
                byte_start: start,
                byte_len: len as u32,
                offset_count: info.offset_count,
                max_timestamp: info.max_timestamp,
                producer: (info.producer_id >= 0).then_some(ProducerFields {
                    producer_id: info.producer_id,
                    producer_epoch: info.producer_epoch,
                    base_sequence: info.base_sequence,
                }),
            });
            part.chunks.push(bytes);
            buf.bytes += len;
            (
                buf.done.clone(),
                part_idx,
                batch_idx,
                buf.bytes >= self.agent.cfg.flush_bytes,
                first,
            )
        };
        if seal_now {
            self.seal(false);
        } else if first {
            let (wait, window) = self.agent.until_next_window();
            let generation = {
                let mut buf = self.buffer.borrow_mut();
                buf.window = Some(window);
                buf.generation
            };
            self.agent.windows.announce(window);
            let me = self.clone();
            rutomq_shards::spawn(async move {
                rutomq_shards::sleep(wait).await;
                if me.buffer.borrow().generation == generation {
                    me.seal(true);
                }
            });
        }
        (done, part_idx, batch_idx)
    }

    /// Seals the open buffer and sends it towards the pipeline; `on_grid`
    /// when its window's time has come (not flush_bytes).
    pub fn seal(&self, on_grid: bool) {
        let sealed = {
            let mut buf = self.buffer.borrow_mut();
            if buf.bytes == 0 {
                return;
            }
            let next = OpenBuffer::new(buf.generation + 1);
            let old = std::mem::replace(&mut *buf, next);
            // Sealed before its window (flush_bytes reached): it travels
            // alone, and the window no longer waits for it.
            let window = match old.window {
                Some(w) if !on_grid => {
                    self.agent.windows.withdraw(w);
                    None
                }
                Some(w) => {
                    let late = self.agent.window_end(w).elapsed();
                    self.agent.stages.seal_late.observe(late);
                    Some(w)
                }
                None => None,
            };
            Sealed {
                parts: old.parts.into_values().collect(),
                bytes: old.bytes,
                reply: old.reply,
                sealed_at: std::time::Instant::now(),
                window,
            }
        };
        if let Err(e) = self.seal_tx.unbounded_send(sealed) {
            let _ = e.into_inner().reply.send(Err(ErrorCode::KafkaStorageError));
        }
    }
}
