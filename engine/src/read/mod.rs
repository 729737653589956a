//! Reading committed records back: spans → exact byte ranges → batches with
//! their base offsets patched. Shared by Fetch and ListOffsets. A shard's
//! [`Reader`] owns what it knows of committed partitions (high watermarks
//! with their long-poll waiters, cached spans) and is fed by the hub.

mod spans;
mod stable;
mod watermarks;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures::future::{FutureExt, LocalBoxFuture, Shared};
use rutomq_meta::{Meta, PartitionOffsets, SpanRecord};
use rutomq_storage::Storage;
use uuid::Uuid;

#[cfg(test)]
pub(crate) use spans::test_span;
pub use spans::SpanCache;
pub use stable::{Aborted, StableIndex, StableView};
pub use watermarks::Watermarks;

use crate::error::ErrorCode;
use crate::hub::HubNews;
use crate::limits::{
    ABORTED_TXNS_LOADED_MAX, FETCH_SPANS_READ_MAX, READ_AHEAD_FETCHES_MAX,
    READ_AHEAD_SPANS_PER_FETCH, SPAN_READS_AHEAD_MAX,
};
use crate::metrics::ShardMetrics;
use crate::records::{txn_marker_batch, walk_batch_chunks, StoredBatch, TxnMarker};

/// A batch read back, with its assigned base offset.
pub struct ReadBatch {
    pub base_offset: i64,
    pub batch: StoredBatch,
}

/// Records of one partition from `fetch_offset`, at most about `bytes_max`
/// (always at least one batch when any is available, so consumers progress).
pub struct PartitionRead {
    pub high_watermark: i64,
    /// Known only for read_committed reads (-1 otherwise).
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub records: Records,
    /// read_committed: the aborted transactions (producer id, first
    /// offset) of the records returned, by first offset.
    pub aborted: Option<Vec<(i64, i64)>>,
}

/// Told to the partition reads of one Fetch once its response has enough
/// records without the ones still waiting: a partition whose spans are
/// still on their way from the object store is then answered without
/// records (its offsets as read), and its GETs go on into the read cache,
/// where the consumer's next fetch finds them. Without it, with 30 ms
/// object latency, a fetch of four partitions waited for the slowest GET
/// of any of them, and the consumer with it.
#[derive(Clone)]
pub struct Enough(Shared<futures::channel::oneshot::Receiver<()>>);

impl Enough {
    /// The signal and its sender: send (or drop) to tell the reads.
    pub fn new() -> (futures::channel::oneshot::Sender<()>, Enough) {
        let (tx, rx) = futures::channel::oneshot::channel();
        (tx, Enough(rx.shared()))
    }
}

/// Stored batches (shared, not copied) with the base offsets they get on
/// the wire (the Fetch encoder sends large ones as they are, copies small
/// ones into the frame).
#[derive(Default)]
pub struct Records {
    pub batches: Vec<(i64, bytes::Bytes)>,
    pub len: usize,
}

impl Records {
    pub fn push(&mut self, base_offset: i64, batch: bytes::Bytes) {
        self.len += batch.len();
        self.batches.push((base_offset, batch));
    }
}

/// A PostgreSQL read of a partition's spans from an offset, shared by the
/// fetches that want the same one while it runs.
type SpanQuery =
    Shared<LocalBoxFuture<'static, Result<(PartitionOffsets, Rc<Vec<SpanRecord>>), ErrorCode>>>;

/// Removes a span query from the in-flight map when the fetch that started
/// it finishes or is dropped (the others waiting on it still get its
/// answer: each holds the shared future).
struct Running<'a> {
    queries: &'a SpanQueries,
    key: (Uuid, i32, i64),
    news: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut queries = self.queries.borrow_mut();
        // A newer query may have taken the key since.
        if queries.get(&self.key).is_some_and(|(n, _)| *n == self.news) {
            queries.remove(&self.key);
        }
    }
}

/// Span queries in flight by (topic, partition, from offset), each with
/// the news count it started at.
type SpanQueries = RefCell<HashMap<(Uuid, i32, i64), (u64, SpanQuery)>>;

/// One shard's read side.
pub struct Reader {
    meta: Meta,
    storage: Storage,
    /// Check the CRC of batches read back from the object store.
    verify_crc: bool,
    /// Read-ahead depth in fetches (`--read-ahead-fetches`).
    read_ahead_fetches: usize,
    pub watermarks: Watermarks,
    pub spans: Rc<SpanCache>,
    /// Reads of spans ahead of consumers in flight (at most
    /// [`SPAN_READS_AHEAD_MAX`]).
    spans_ahead: Rc<Cell<usize>>,
    metrics: Arc<ShardMetrics>,
    pub stable: StableIndex,
    /// Span queries in flight, by (topic, partition, from offset): the
    /// consumers of many groups at the tail of a partition wake on the
    /// same commit and miss the cache together (a notification can
    /// overtake the spans of this agent's own commit); one query serves
    /// them all.
    span_queries: SpanQueries,
    /// Hub news learned so far: a fetch joins only a span query that
    /// started after the news it woke on (an older one may not see that
    /// commit).
    news: Cell<u64>,
}

impl Reader {
    pub fn new(
        meta: Meta,
        storage: Storage,
        verify_crc: bool,
        read_ahead_fetches: usize,
        metrics: Arc<ShardMetrics>,
    ) -> Reader {
        Reader {
            meta,
            storage,
            verify_crc,
            read_ahead_fetches: read_ahead_fetches.min(READ_AHEAD_FETCHES_MAX),
            watermarks: Watermarks::default(),
            spans: Rc::default(),
            spans_ahead: Rc::default(),
            metrics,
            stable: StableIndex::default(),
            span_queries: RefCell::default(),
            news: Cell::new(0),
        }
    }

    /// Spans past a fetch whose objects are read ahead at most.
    fn read_ahead_spans(&self) -> usize {
        self.read_ahead_fetches * READ_AHEAD_SPANS_PER_FETCH
    }

    /// The spans of a partition from `fetch_offset`, from PostgreSQL (or
    /// from the same query another fetch started), remembered in the
    /// cache.
    async fn query_spans(
        &self,
        topic_id: Uuid,
        partition: i32,
        fetch_offset: i64,
    ) -> Result<(PartitionOffsets, Rc<Vec<SpanRecord>>), ErrorCode> {
        let key = (topic_id, partition, fetch_offset);
        let news = self.news.get();
        let running = self
            .span_queries
            .borrow()
            .get(&key)
            .filter(|(started, _)| *started == news)
            .map(|(_, q)| q.clone());
        if let Some(query) = running {
            return query.await;
        }
        let meta = self.meta.clone();
        let query: SpanQuery = async move {
            let (offsets, spans) = meta
                .fetch_spans(topic_id, partition, fetch_offset, FETCH_SPANS_READ_MAX)
                .await
                .map_err(|e| ErrorCode::from(&e))?;
            let offsets = offsets.ok_or(ErrorCode::UnknownTopicOrPartition)?;
            Ok((offsets, Rc::new(spans)))
        }
        .boxed_local()
        .shared();
        self.span_queries
            .borrow_mut()
            .insert(key, (news, query.clone()));
        // Out of the map when this fetch is done with it, or dropped.
        let _running = Running {
            queries: &self.span_queries,
            key,
            news,
        };
        self.metrics
            .span_reads_waited
            .fetch_add(1, Ordering::Relaxed);
        let asked_at = Instant::now();
        let got = query.await;
        if let Ok((offsets, spans)) = &got {
            self.watermarks
                .set(topic_id, partition, offsets.high_watermark);
            self.spans.remember(
                topic_id,
                partition,
                offsets.log_start_offset,
                fetch_offset,
                spans,
                asked_at,
            );
        }
        got
    }

    /// Reads the spans of a partition from `from` (where the spans this
    /// shard knows end, below the high watermark) without waiting, and
    /// appends them to the cache when they still continue it. Called when
    /// read-ahead could reach the end of the known spans: without it the
    /// consumer's fetch would find no spans there, wait for PostgreSQL,
    /// and only then start reading objects it could have had read ahead
    /// (with 30 ms GETs that was a stall of a GET's time every 64 spans of
    /// every partition a consumer reads from the beginning). One read per
    /// end of a partition's cached list ([`SpanCache::claim_ahead`]),
    /// [`SPAN_READS_AHEAD_MAX`] per shard at once; none when read-ahead is
    /// off.
    fn read_spans_ahead(&self, topic_id: Uuid, partition: i32, from: i64) {
        if self.spans_ahead.get() >= SPAN_READS_AHEAD_MAX
            || !self.spans.claim_ahead(topic_id, partition, from)
        {
            return;
        }
        self.spans_ahead.set(self.spans_ahead.get() + 1);
        self.metrics
            .span_reads_ahead
            .fetch_add(1, Ordering::Relaxed);
        let (meta, cache, ahead) = (
            self.meta.clone(),
            self.spans.clone(),
            self.spans_ahead.clone(),
        );
        rutomq_shards::spawn(async move {
            match meta
                .fetch_spans(topic_id, partition, from, FETCH_SPANS_READ_MAX)
                .await
            {
                Ok((Some(offsets), spans)) => {
                    cache.append(topic_id, partition, offsets.log_start_offset, from, &spans);
                }
                // Deleted meanwhile: the next fetch finds out.
                Ok((None, _)) => {}
                Err(e) => {
                    tracing::debug!(error = %e, %topic_id, partition, "reading spans ahead failed")
                }
            }
            ahead.set(ahead.get() - 1);
        });
    }

    /// What the hub said was committed or retired.
    pub fn learn(&self, news: &HubNews) {
        self.news.set(self.news.get() + 1);
        self.spans.extend(&news.spans);
        self.stable.learn(&news.marks);
        self.watermarks.learn(&news.marks);
        self.spans.advance_log_starts(&news.log_starts);
        self.spans.forget(&news.compacted);
    }

    /// Reads the batches of `span` (checked: framing, offsets add up; the
    /// CRC when the agent was told to, or when `verify` says so: the agent
    /// itself acts on what it reads).
    pub async fn read_span(
        &self,
        span: &SpanRecord,
        verify: bool,
    ) -> Result<Vec<ReadBatch>, ErrorCode> {
        read_span(&self.storage, span, verify || self.verify_crc).await
    }

    /// What a read_committed fetch from `fetch_offset` may return and must
    /// list, from this shard's index or one PostgreSQL snapshot.
    pub async fn stable_view(
        &self,
        topic_id: Uuid,
        partition: i32,
        fetch_offset: i64,
    ) -> Result<StableView, ErrorCode> {
        if let Some(v) = self.stable.get(topic_id, partition, fetch_offset) {
            return Ok(v);
        }
        let asked_at = Instant::now();
        let state = self
            .meta
            .stable_state(topic_id, partition, fetch_offset, ABORTED_TXNS_LOADED_MAX)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "cannot read a partition's last stable offset");
                ErrorCode::from(&e)
            })?
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        self.watermarks
            .set(topic_id, partition, state.high_watermark);
        Ok(self
            .stable
            .remember(topic_id, partition, fetch_offset, &state, asked_at))
    }

    /// Records of a partition from `fetch_offset`; with `committed`
    /// (read_committed) only below the last stable offset, with the aborted
    /// transactions among them listed. `verify`: check the CRC of batches
    /// read from the object store whatever `--read-verify-crc` says (share
    /// groups act on the batch headers they read). `enough`: once told, no
    /// more waiting for the object store (no records then; see [`Enough`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn read_partition(
        &self,
        topic_id: Uuid,
        partition: i32,
        fetch_offset: i64,
        bytes_max: usize,
        committed: bool,
        verify: bool,
        enough: Option<&Enough>,
    ) -> Result<PartitionRead, ErrorCode> {
        let stable = if committed {
            Some(self.stable_view(topic_id, partition, fetch_offset).await?)
        } else {
            None
        };
        let cached = self.watermarks.known(topic_id, partition).and_then(|hw| {
            self.spans
                .get(
                    topic_id,
                    partition,
                    fetch_offset,
                    hw,
                    bytes_max,
                    self.read_ahead_spans(),
                )
                .map(|(log_start, spans)| (hw, log_start, Rc::new(spans)))
        });
        let (high_watermark, log_start_offset, spans) = match cached {
            Some(c) => c,
            None => {
                // Shared with the other fetches that asked: read, not copied.
                let (offsets, spans) = self.query_spans(topic_id, partition, fetch_offset).await?;
                (offsets.high_watermark, offsets.log_start_offset, spans)
            }
        };
        let mut out = PartitionRead {
            high_watermark,
            last_stable_offset: stable
                .as_ref()
                .map_or(-1, |s| s.last_stable_offset.min(high_watermark)),
            log_start_offset,
            records: Records::default(),
            aborted: None,
        };
        if fetch_offset < log_start_offset || fetch_offset > high_watermark {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        // read_committed stops at the last stable offset.
        let limit = stable
            .as_ref()
            .map_or(high_watermark, |s| s.read_limit.min(high_watermark));
        // The spans that can fill `bytes_max`, read concurrently (each is one
        // GET, or a share of one whole-object GET).
        let mut chosen = Vec::new();
        let mut planned = 0usize;
        let all = &spans[..];
        let mut spans = all.iter();
        for span in spans.by_ref() {
            if span.base_offset >= limit {
                break;
            }
            if span.last_offset < fetch_offset {
                continue;
            }
            planned += span.byte_len as usize;
            chosen.push(span);
            if planned >= bytes_max {
                break;
            }
        }
        // Read ahead: the objects of the next spans, which this consumer's
        // next fetch will want (a no-op for objects already cached).
        let known_end = all.last().map_or(fetch_offset, |s| s.last_offset + 1);
        let known_ahead = spans.len();
        let mut ahead = 0usize;
        for span in spans.take(self.read_ahead_spans()) {
            if ahead >= self.read_ahead_fetches * bytes_max {
                break;
            }
            ahead += span.byte_len as usize;
            if span.marker.is_none() {
                let range = span.byte_start..span.byte_start + span.byte_len as u64;
                self.storage
                    .prefetch(&span.object_key, span.object_size, range);
            }
        }
        // Fewer spans known past this fetch than read-ahead may reach, while
        // more are committed: read the next ones before the consumer (or
        // its read-ahead) gets there.
        if self.read_ahead_fetches > 0
            && known_ahead < self.read_ahead_spans()
            && known_end < high_watermark
        {
            self.read_spans_ahead(topic_id, partition, known_end);
        }
        let reads = futures::future::join_all(chosen.iter().map(|s| self.read_span(s, verify)));
        // Ready reads (cache hits) are taken even when the response has
        // enough already: `select` polls them first.
        let reads = match enough {
            None => reads.await,
            Some(Enough(told)) => match futures::future::select(reads, told.clone()).await {
                futures::future::Either::Left((reads, _)) => reads,
                futures::future::Either::Right(_) => {
                    self.metrics
                        .fetch_reads_unwaited
                        .fetch_add(1, Ordering::Relaxed);
                    Vec::new()
                }
            },
        };
        let mut end_offset = fetch_offset;
        // Markers returned (compaction may have removed others).
        let mut markers = Vec::new();
        'spans: for (span, read) in chosen.iter().zip(reads) {
            for rb in read? {
                let last = rb.base_offset + rb.batch.last_offset_delta as i64;
                if last < fetch_offset {
                    continue;
                }
                if rb.base_offset >= limit {
                    break 'spans;
                }
                if out.records.len > 0 && out.records.len + rb.batch.bytes.len() > bytes_max {
                    break 'spans;
                }
                out.records.push(rb.base_offset, rb.batch.bytes);
                if span.marker.is_some() {
                    markers.push(rb.base_offset);
                }
                end_offset = last + 1;
                if out.records.len >= bytes_max {
                    break 'spans;
                }
            }
        }
        if let Some(s) = stable {
            // Kafka's rule: the aborted transactions whose marker is at or
            // after the fetch offset and that began below the end of what
            // is returned, by first offset. One whose marker lies within
            // what is returned must come with it: compaction removes a
            // marker (after its data) and a cached list may still hold it;
            // listed without its marker, it would make consumers drop the
            // producer's later committed batches.
            let mut aborted: Vec<(i64, i64)> = s
                .aborted
                .iter()
                .filter(|a| a.first_offset < end_offset)
                .filter(|a| {
                    a.marker_offset >= end_offset || markers.binary_search(&a.marker_offset).is_ok()
                })
                .map(|a| (a.producer_id, a.first_offset))
                .collect();
            aborted.sort_by_key(|a| a.1);
            out.aborted = Some(aborted);
        }
        Ok(out)
    }
}

/// Reads the batches of `span`, checked: each batch's framing, the offsets
/// and batch count against the span's row, and with `verify_crc` the CRC of
/// batches that come from the object store (those of the tail cache are the
/// very bytes this agent checked when they were produced).
pub async fn read_span(
    storage: &Storage,
    span: &SpanRecord,
    verify_crc: bool,
) -> Result<Vec<ReadBatch>, ErrorCode> {
    if let Some(m) = span.marker {
        // A marker has no object: its 78 bytes are built here.
        return Ok(vec![ReadBatch {
            base_offset: span.base_offset,
            batch: StoredBatch {
                bytes: txn_marker_batch(&TxnMarker {
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                    commit: m.commit,
                    coordinator_epoch: m.coordinator_epoch,
                    timestamp_ms: span.max_timestamp,
                }),
                last_offset_delta: 0,
                max_timestamp: span.max_timestamp,
            },
        }]);
    }
    let (chunks, origin) = storage
        .get_range(
            span.object_key.clone(),
            span.byte_start..span.byte_start + span.byte_len as u64,
            span.object_size,
        )
        .await
        .map_err(|e| {
            tracing::error!(error = %e, key = span.object_key, "reading a committed span failed");
            ErrorCode::from(&e)
        })?;
    let mut out = Vec::with_capacity(span.batch_count.max(0) as usize);
    let mut next = span.base_offset;
    for b in walk_batch_chunks(
        chunks,
        verify_crc && origin == rutomq_storage::Origin::Stored,
    ) {
        let b = b.map_err(|invalid| {
            tracing::error!(
                key = span.object_key,
                message = invalid.message,
                "committed span is corrupt"
            );
            ErrorCode::KafkaStorageError
        })?;
        // A compacted (sparse) span's batches say where they start;
        // others follow each other from the span's base.
        let base = if span.sparse {
            i64::from_be_bytes(b.bytes[..8].try_into().expect("a batch header"))
        } else {
            next
        };
        if base < next {
            tracing::error!(key = span.object_key, "span batches overlap");
            return Err(ErrorCode::KafkaStorageError);
        }
        next = base + b.last_offset_delta as i64 + 1;
        out.push(ReadBatch {
            base_offset: base,
            batch: b,
        });
    }
    if next != span.last_offset + 1 || out.len() != span.batch_count as usize {
        tracing::error!(
            key = span.object_key,
            "span offsets do not match its batches"
        );
        return Err(ErrorCode::KafkaStorageError);
    }
    Ok(out)
}
