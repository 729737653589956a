//! Object storage for rutomq: object naming, the storage thread (a tokio
//! runtime running `object_store` uploads and range reads) and the bounded
//! tail cache of objects this agent wrote recently.
//!
//! Objects are immutable. A key is unique per upload
//! (`<prefix>/objects/<agent>/<time>-<uuid>.rtq`), so a retried or
//! concurrent upload can never overwrite data another span points at.

mod cache;
mod file;
mod latency;
pub mod limits;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, GetResultPayload, ObjectStore, ObjectStoreExt, PutPayload,
};

pub use cache::TailCache;
pub use file::FileStore;
pub use latency::{with_injected_latency, InjectedLatency, LatencyStore};
pub use limits::*;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("bad object store url {0:?}: {1}")]
    BadUrl(String, String),
    #[error("storage thread is gone")]
    Closed,
    /// A whole-object read that several readers waited on failed.
    #[error("object store: {0}")]
    Shared(Arc<object_store::Error>),
    #[error("object {key} is {len} bytes; range {start}..{end} is outside it")]
    ShortObject {
        key: String,
        len: u64,
        start: u64,
        end: u64,
    },
}

/// Where a read was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The tail cache: the very bytes this agent validated and uploaded.
    Written,
    /// The object store (directly or through the read cache).
    Stored,
}

/// Options for `s3://` stores (S3 or an S3-compatible server).
#[derive(Clone, Debug, Default)]
pub struct S3Options {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub allow_http: bool,
}

/// The file store's pool of read blocks (see [`READ_BLOCK_BYTES`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadBlocksOptions {
    /// Free blocks kept, in bytes (0: [`READ_BLOCKS_KEPT_BYTES_DEFAULT`],
    /// none faulted in).
    pub bytes: usize,
    /// Make and fault in all of them at start (not on a filesystem that
    /// refuses `O_DIRECT`: its reads use no blocks).
    pub fault_in: bool,
}

/// Read-ahead may fill at most 1/N of the read cache: objects read ahead
/// and not read from yet, plus read-ahead in flight. Without the bound,
/// read-ahead of large spans evicted objects that consumers had not reached
/// yet, and each object was read 3-4 times.
pub const READ_AHEAD_CACHE_SHARE_DEN: usize = 2;

/// A read into the read cache, shared by its readers: the object's (or
/// span's) bytes as the chunks the store answered with.
type ObjectRead = Shared<BoxFuture<'static, Result<Vec<Bytes>, Arc<object_store::Error>>>>;

/// GETs `range` of `path` (None: the whole object) as chunks (see
/// [`gather`]; the file store's read blocks come without a copy).
async fn get_chunks(
    store: &dyn ObjectStore,
    path: &Path,
    range: Option<Range<u64>>,
    size: usize,
) -> object_store::Result<Vec<Bytes>> {
    let options = GetOptions {
        range: range.map(GetRange::Bounded),
        ..Default::default()
    };
    gather(store.get_opts(path, options).await?, size).await
}

/// Collects the body of a GET of about `size` bytes: its chunks kept as
/// they are while each (but the last) is most of a read block (the file
/// store's, lent without a copy); from the first that is not (an HTTP body
/// in small frames), joined into one buffer as they come, as
/// `GetResult::bytes` would. A file answered whole (`LocalFileSystem`,
/// without `O_DIRECT`) is read in one piece.
async fn gather(r: GetResult, size: usize) -> object_store::Result<Vec<Bytes>> {
    if !matches!(r.payload, GetResultPayload::Stream(_)) {
        return Ok(vec![r.bytes().await?]);
    }
    let mut body = r.into_stream();
    let mut kept: Vec<Bytes> = Vec::new();
    let mut joined: Option<bytes::BytesMut> = None;
    while let Some(c) = body.try_next().await? {
        if let Some(j) = &mut joined {
            j.extend_from_slice(&c);
        } else if kept.last().is_some_and(|l| l.len() < READ_BLOCK_BYTES / 2) {
            let mut j = bytes::BytesMut::with_capacity(size.max(c.len()));
            for k in kept.drain(..) {
                j.extend_from_slice(&k);
            }
            j.extend_from_slice(&c);
            joined = Some(j);
        } else {
            kept.push(c);
        }
    }
    Ok(match joined {
        Some(j) => vec![j.freeze()],
        None => kept,
    })
}

/// Objects of one agent are grouped in a "directory" per this many ms of
/// creation time. On a file store that keeps directories small and puts
/// new files in a directory that retention is not emptying at the same
/// time (unlinks in the directory that new files are created and synced
/// in stalled the writers).
pub const OBJECT_DIR_SPAN_MS: u128 = 10_000;

#[derive(Default, Debug)]
pub struct StorageStats {
    pub puts: AtomicU64,
    pub put_bytes: AtomicU64,
    pub put_failures: AtomicU64,
    pub gets: AtomicU64,
    pub get_bytes: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Reads served by the read cache (objects read whole before).
    pub read_cache_hits: AtomicU64,
    /// Reads that joined a GET already in flight (of a whole object or a
    /// span).
    pub read_joins: AtomicU64,
    /// Whole-object (or span) reads started ahead of a consumer.
    pub prefetches: AtomicU64,
    /// GETs of one span: of an object too large to read whole, or read by
    /// span while whole reads would be wasted (`by_span`).
    pub span_gets: AtomicU64,
    /// Read-ahead not started because the read cache's budget for it was
    /// used up (see [`READ_AHEAD_CACHE_SHARE_DEN`]).
    pub prefetches_refused: AtomicU64,
    /// Sealed shard buffers gathered into uploaded objects (several per
    /// object when several shards wrote in one window).
    pub sealed_buffers: AtomicU64,
    /// Objects deleted (retired by retention, or orphans).
    pub deletes: AtomicU64,
}

/// Opens the store named by `url`: `file:///abs/dir`, `memory://`, or
/// `s3://bucket[/prefix]`. Returns the store and the key prefix inside it.
/// A file store keeps the read blocks `blocks` asks for.
pub fn open_store(
    url: &str,
    s3: &S3Options,
    blocks: ReadBlocksOptions,
) -> Result<(Arc<dyn ObjectStore>, Path), StorageError> {
    let bad = |why: &str| StorageError::BadUrl(url.to_owned(), why.to_owned());
    if let Some(rest) = url.strip_prefix("file://") {
        if !rest.starts_with('/') {
            return Err(bad(
                "file:// needs an absolute path, e.g. file:///var/lib/rutomq/objects",
            ));
        }
        std::fs::create_dir_all(rest).map_err(|e| bad(&format!("cannot create directory: {e}")))?;
        // The object and its directory are synced before the PUT returns:
        // a produce is acknowledged only once its object is durable.
        let mut store = FileStore::new(std::path::Path::new(rest))?;
        if blocks.bytes > 0 {
            store = store.with_read_blocks(blocks.bytes, blocks.fault_in);
        }
        Ok((Arc::new(store), Path::default()))
    } else if url == "memory://" || url == "memory:///" {
        Ok((
            Arc::new(object_store::memory::InMemory::new()),
            Path::default(),
        ))
    } else if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("s3:// needs a bucket, e.g. s3://bucket/prefix"));
        }
        let mut b = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(e) = &s3.endpoint {
            b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        }
        if let Some(r) = &s3.region {
            b = b.with_region(r);
        }
        if let Some(k) = &s3.access_key_id {
            b = b.with_access_key_id(k);
        }
        if let Some(k) = &s3.secret_access_key {
            b = b.with_secret_access_key(k);
        }
        if s3.allow_http {
            b = b.with_allow_http(true);
        }
        let store = b.build()?;
        Ok((Arc::new(store), Path::from(prefix.trim_matches('/'))))
    } else {
        Err(bad(
            "expected file:///path, memory:// or s3://bucket/prefix",
        ))
    }
}

/// Handle to the storage thread. Cheap to clone; `Send`; usable from any
/// runtime (work is spawned onto the storage runtime, answers come back on
/// oneshots).
#[derive(Clone)]
pub struct Storage {
    rt: tokio::runtime::Handle,
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    cache: Arc<Mutex<TailCache>>,
    /// Objects read whole (see [`WHOLE_OBJECT_READ_BYTES_MAX`]).
    read_cache: Arc<Mutex<TailCache>>,
    /// Reads in flight (whole objects, or spans by their part key), shared
    /// by every reader.
    reads: Arc<Mutex<HashMap<String, ObjectRead>>>,
    /// Bytes of read-ahead reads in flight.
    read_ahead_bytes: Arc<AtomicUsize>,
    /// Bytes of all reads in `reads`.
    reading_bytes: Arc<AtomicUsize>,
    /// Over a distant store ([`Storage::distant`]).
    distant: bool,
    pub stats: Arc<StorageStats>,
}

/// Owns the storage runtime; dropping it stops the thread.
pub struct StorageThread {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Drop for StorageThread {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Storage {
    /// Starts the storage thread over `store`, with a tail cache of at most
    /// `tail_cache_bytes_max` bytes and a read cache of at most
    /// `read_cache_bytes_max`.
    pub fn start(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        tail_cache_bytes_max: usize,
        read_cache_bytes_max: usize,
    ) -> std::io::Result<(Storage, StorageThread)> {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let join = std::thread::Builder::new()
            .name("storage".into())
            .spawn(move || {
                // Two workers: uploads overlap with range reads and with the
                // filesystem's blocking calls.
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("storage-io")
                    .enable_all()
                    .build()
                    .expect("storage runtime");
                let _ = handle_tx.send(rt.handle().clone());
                rt.block_on(async {
                    let _ = shutdown_rx.await;
                });
                rt.shutdown_timeout(std::time::Duration::from_secs(10));
            })?;
        let rt = handle_rx
            .recv()
            .map_err(|_| std::io::Error::other("storage thread died at start"))?;
        Ok((
            Storage {
                rt,
                store,
                prefix,
                cache: Arc::new(Mutex::new(TailCache::new(tail_cache_bytes_max))),
                read_cache: Arc::new(Mutex::new(TailCache::with_ghosts(
                    read_cache_bytes_max,
                    READ_CACHE_GHOSTS_MAX,
                ))),
                reads: Arc::new(Mutex::new(HashMap::new())),
                read_ahead_bytes: Arc::new(AtomicUsize::new(0)),
                reading_bytes: Arc::new(AtomicUsize::new(0)),
                distant: false,
                stats: Arc::new(StorageStats::default()),
            },
            StorageThread {
                shutdown: Some(shutdown_tx),
                join: Some(join),
            },
        ))
    }

    /// The same storage over a distant store, where a GET takes tens of
    /// milliseconds (S3): it reads spans of at least
    /// [`DISTANT_SPAN_READ_BYTES_MIN`] by themselves rather than their
    /// whole object (see there), unless the object is cached whole or its
    /// whole read is in flight already. A local directory reads whole objects while
    /// their partitions are read together: there a GET costs no wait, and
    /// one read serves every partition of the object.
    pub fn distant(mut self) -> Self {
        self.distant = true;
        self
    }

    /// Share of whole objects' bytes read before the read cache evicted
    /// them, lately ([`TailCache::whole_use`]).
    pub fn read_cache_whole_use(&self) -> f64 {
        self.read_cache.lock().expect("read cache lock").whole_use()
    }

    /// Runs a future on the storage runtime.
    pub fn spawn<F>(&self, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.rt.spawn(fut);
    }

    async fn on_runtime<T, F>(&self, fut: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, StorageError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.await.map_err(|_| StorageError::Closed)?
    }

    /// A new unique object key for this agent.
    pub fn new_object_key(&self, agent_id: i32) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let millis = now.as_millis();
        let name = format!(
            "objects/{agent_id}/{:09}/{millis:013}-{}.rtq",
            millis / OBJECT_DIR_SPAN_MS,
            uuid::Uuid::new_v4().simple()
        );
        if self.prefix.as_ref().is_empty() {
            name
        } else {
            format!("{}/{name}", self.prefix)
        }
    }

    /// Uploads `chunks` as one object (vectored, no copy) and keeps it in the
    /// tail cache.
    pub async fn put(&self, key: String, chunks: Vec<Bytes>) -> Result<(), StorageError> {
        let store = self.store.clone();
        let cache = self.cache.clone();
        let stats = self.stats.clone();
        self.on_runtime(async move {
            let size: usize = chunks.iter().map(Bytes::len).sum();
            let payload: PutPayload = chunks.iter().cloned().collect();
            let path = Path::from(key.as_str());
            match store.put(&path, payload).await {
                Ok(_) => {
                    stats.puts.fetch_add(1, Ordering::Relaxed);
                    stats.put_bytes.fetch_add(size as u64, Ordering::Relaxed);
                    cache.lock().expect("tail cache lock").insert(key, chunks);
                    Ok(())
                }
                Err(e) => {
                    stats.put_failures.fetch_add(1, Ordering::Relaxed);
                    Err(e.into())
                }
            }
        })
        .await
    }

    /// Reads `range` of object `key` (of `object_size` bytes, 0 if unknown):
    /// from the tail cache or the read cache when it is there; otherwise a
    /// small object is read whole (one GET shared by all its readers) and
    /// cached. A large object, a ghost (see [`TailCache`]), or a long span
    /// of a distant store's object ([`Storage::distant`]) is read by span:
    /// the range alone, shared with its read-ahead and cached (`by_span`). The
    /// bytes come as the chunks they are held in (slices, not copies: a
    /// range across two read blocks is two chunks).
    pub async fn get_range(
        &self,
        key: String,
        range: Range<u64>,
        object_size: u64,
    ) -> Result<(Vec<Bytes>, Origin), StorageError> {
        let (start, end) = (range.start, range.end);
        let short = move |len: u64, key: String| StorageError::ShortObject {
            key,
            len,
            start,
            end,
        };
        if let Some(b) = self
            .cache
            .lock()
            .expect("tail cache lock")
            .get_range(&key, range.clone())
        {
            self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok((b, Origin::Written));
        }
        let mut plan = {
            let mut cache = self.read_cache.lock().expect("read cache lock");
            let mut hit = cache.get_range(&key, range.clone());
            let plan = hit
                .is_none()
                .then(|| read_plan(&cache, self.distant, &key, object_size, &range));
            if let Some(ReadPlan {
                cache_key,
                range: Some(span),
                ..
            }) = &plan
            {
                hit = cache.get_range(cache_key, 0..span.end - span.start);
            }
            if let Some(b) = hit {
                self.stats.read_cache_hits.fetch_add(1, Ordering::Relaxed);
                return Ok((b, Origin::Stored));
            }
            plan.expect("planned on a miss")
        };
        if range.end > object_size && object_size > 0 {
            return Err(short(object_size, key));
        }
        if let Some(read) = self.shared_read(&key, &mut plan, object_size, false) {
            let chunks = self
                .on_runtime(async move { read.await.map_err(StorageError::Shared) })
                .await?;
            // A part starts at the span; a whole object at byte 0.
            let wanted = match &plan.range {
                Some(span) => 0..span.end - span.start,
                None => range.clone(),
            };
            let Some(bytes) = cache::slice_chunks(&chunks, wanted.clone()) else {
                let len = chunks.iter().map(|c| c.len() as u64).sum();
                return Err(short(len, key));
            };
            self.read_cache
                .lock()
                .expect("read cache lock")
                .mark_read(&plan.cache_key, (wanted.end - wanted.start) as usize);
            return Ok((bytes, Origin::Stored));
        }
        // Too many reads in flight to share one: a ranged GET of its own,
        // not cached.
        let store = self.store.clone();
        let stats = self.stats.clone();
        self.on_runtime(async move {
            let path = Path::from(key.as_str());
            let len = (range.end - range.start) as usize;
            let chunks = get_chunks(store.as_ref(), &path, Some(range), len).await?;
            let got: usize = chunks.iter().map(Bytes::len).sum();
            if got != len {
                return Err(short(got as u64, key));
            }
            stats.gets.fetch_add(1, Ordering::Relaxed);
            stats.get_bytes.fetch_add(got as u64, Ordering::Relaxed);
            Ok((chunks, Origin::Stored))
        })
        .await
    }

    /// Starts reading the object `key` whole into the read cache, or only
    /// its `span` when it is read by span (see [`Storage::get_range`]),
    /// without waiting: read-ahead for a consumer about to need it. Does
    /// nothing when it is cached or in flight, too many reads are in
    /// flight, or the read-ahead budget of the read cache is used up.
    pub fn prefetch(&self, key: &str, object_size: u64, span: Range<u64>) {
        if object_size == 0 || self.cache.lock().expect("tail cache lock").contains(key) {
            return;
        }
        let mut plan = {
            let cache = self.read_cache.lock().expect("read cache lock");
            if cache.contains(key) {
                return;
            }
            let plan = read_plan(&cache, self.distant, key, object_size, &span);
            if plan.range.is_some() && cache.contains(&plan.cache_key) {
                return;
            }
            let ahead = cache.unread_bytes() + self.read_ahead_bytes.load(Ordering::Relaxed);
            if ahead + plan.size as usize > cache.bytes_max() / READ_AHEAD_CACHE_SHARE_DEN {
                self.stats
                    .prefetches_refused
                    .fetch_add(1, Ordering::Relaxed);
                return;
            }
            plan
        };
        if let Some(read) = self.shared_read(key, &mut plan, object_size, true) {
            self.stats.prefetches.fetch_add(1, Ordering::Relaxed);
            let size = plan.size as usize;
            let in_flight = self.read_ahead_bytes.clone();
            in_flight.fetch_add(size, Ordering::Relaxed);
            self.rt.spawn(async move {
                let _ = read.await;
                in_flight.fetch_sub(size, Ordering::Relaxed);
            });
        }
    }

    /// The read `plan` of object `key` into the read cache: joins the one
    /// in flight, or starts one (None when too many are in flight already,
    /// or there is nothing to read: a whole object of unknown size).
    /// Read-ahead (`ahead`) never joins: None when the read is in flight.
    ///
    /// A span of an object whose whole read is in flight joins that read
    /// instead (`plan` becomes the whole object's): its bytes are on their
    /// way, and on a distant store an object's short spans are read whole
    /// while its long ones are read by themselves.
    fn shared_read(
        &self,
        key: &str,
        plan: &mut ReadPlan,
        object_size: u64,
        ahead: bool,
    ) -> Option<ObjectRead> {
        if plan.size == 0 {
            return None;
        }
        let mut reads = self.reads.lock().expect("object reads lock");
        if plan.range.is_some() && reads.contains_key(key) {
            *plan = ReadPlan::whole(key, object_size);
        }
        if let Some(r) = reads.get(&plan.cache_key) {
            if ahead {
                return None;
            }
            self.stats.read_joins.fetch_add(1, Ordering::Relaxed);
            return Some(r.clone());
        }
        let size = plan.size as usize;
        let reading = self.reading_bytes.load(Ordering::Relaxed);
        if reads.len() >= READS_INFLIGHT_MAX || reading + size > READS_INFLIGHT_BYTES_MAX {
            return None;
        }
        self.reading_bytes.fetch_add(size, Ordering::Relaxed);
        let reading = self.reading_bytes.clone();
        let store = self.store.clone();
        let stats = self.stats.clone();
        let read_cache = self.read_cache.clone();
        let all_reads = self.reads.clone();
        let path = Path::from(key);
        let (cache_key, range) = (plan.cache_key.clone(), plan.range.clone());
        let read = async move {
            let result = get_chunks(store.as_ref(), &path, range.clone(), size).await;
            if let Ok(chunks) = &result {
                let len: usize = chunks.iter().map(Bytes::len).sum();
                stats.gets.fetch_add(1, Ordering::Relaxed);
                stats.get_bytes.fetch_add(len as u64, Ordering::Relaxed);
                let mut cache = read_cache.lock().expect("read cache lock");
                if range.is_some() {
                    stats.span_gets.fetch_add(1, Ordering::Relaxed);
                    cache.insert_part(cache_key.clone(), chunks.clone());
                } else {
                    cache.insert(cache_key.clone(), chunks.clone());
                }
            }
            all_reads
                .lock()
                .expect("object reads lock")
                .remove(&cache_key);
            reading.fetch_sub(size, Ordering::Relaxed);
            result.map_err(Arc::new)
        }
        .boxed()
        .shared();
        reads.insert(plan.cache_key.clone(), read.clone());
        Some(read)
    }

    /// Checks that the object store answers (for `/health/ready`).
    pub async fn ping(&self) -> Result<(), StorageError> {
        let store = self.store.clone();
        let prefix = self.prefix.clone();
        self.on_runtime(async move {
            use futures::StreamExt;
            let mut listing = store.list(Some(&prefix));
            match listing.next().await {
                Some(Err(e)) => Err(e.into()),
                _ => Ok(()),
            }
        })
        .await
    }

    /// Keys of objects under this agent's prefix last modified more than
    /// `age` ago, at most `limit` of them, listing from after `after`.
    pub async fn list_older_than(
        &self,
        age: std::time::Duration,
        limit: usize,
        after: Option<String>,
    ) -> Result<Vec<String>, StorageError> {
        let store = self.store.clone();
        let prefix = if self.prefix.as_ref().is_empty() {
            Path::from("objects")
        } else {
            Path::from(format!("{}/objects", self.prefix))
        };
        self.on_runtime(async move {
            use futures::StreamExt;
            let cutoff = std::time::SystemTime::now()
                .checked_sub(age)
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs() as i64);
            let mut listing = match &after {
                Some(a) => store.list_with_offset(Some(&prefix), &Path::from(a.as_str())),
                None => store.list(Some(&prefix)),
            };
            let mut out = Vec::new();
            while let Some(meta) = listing.next().await {
                let meta = meta?;
                if meta.last_modified.timestamp() < cutoff {
                    out.push(meta.location.to_string());
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// Deletes an object (a missing one is fine) and drops it from the caches.
    pub async fn delete(&self, key: String) -> Result<(), StorageError> {
        match self.delete_many(vec![key]).await {
            (_, Some(e)) => Err(e),
            (_, None) => Ok(()),
        }
    }

    /// Deletes many objects, `DELETES_INFLIGHT_MAX` at a time. Returns the
    /// keys known deleted (objects already gone count) and the first
    /// failure; keys not returned are left for a later attempt.
    pub async fn delete_many(&self, keys: Vec<String>) -> (Vec<String>, Option<StorageError>) {
        {
            let mut cache = self.cache.lock().expect("tail cache lock");
            let mut read_cache = self.read_cache.lock().expect("read cache lock");
            for k in &keys {
                cache.remove(k);
                read_cache.remove(k);
            }
        }
        let store = self.store.clone();
        let stats = self.stats.clone();
        let outcome = self
            .on_runtime(async move {
                use futures::StreamExt;
                let mut results = futures::stream::iter(keys)
                    .map(|key| {
                        let store = store.clone();
                        async move {
                            let r = match store.delete(&Path::from(key.as_str())).await {
                                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                                Err(e) => Err(StorageError::from(e)),
                            };
                            (key, r)
                        }
                    })
                    .buffer_unordered(DELETES_INFLIGHT_MAX);
                let mut deleted = Vec::new();
                let mut failed = None;
                while let Some((key, r)) = results.next().await {
                    match r {
                        Ok(()) => {
                            stats.deletes.fetch_add(1, Ordering::Relaxed);
                            deleted.push(key);
                        }
                        Err(e) => {
                            failed.get_or_insert(e);
                        }
                    }
                }
                Ok::<_, StorageError>((deleted, failed))
            })
            .await;
        outcome.unwrap_or_else(|e| (Vec::new(), Some(e)))
    }

    pub fn cache_bytes(&self) -> usize {
        self.cache.lock().expect("tail cache lock").bytes()
    }

    pub fn read_cache_bytes(&self) -> usize {
        self.read_cache.lock().expect("read cache lock").bytes()
    }
}

/// What to read into the read cache for `span` of object `key`.
struct ReadPlan {
    /// The object's key, or the part key of the span.
    cache_key: String,
    /// The span, when it is read alone (a part); None: the whole object.
    range: Option<Range<u64>>,
    /// Bytes it reads (0: a whole object of unknown size, not read).
    size: u64,
}

impl ReadPlan {
    /// Object `key` whole (`object_size` bytes, 0 if unknown).
    fn whole(key: &str, object_size: u64) -> ReadPlan {
        ReadPlan {
            cache_key: key.to_owned(),
            range: None,
            size: object_size,
        }
    }
}

/// The span alone when [`by_span`] says so, else the whole object.
fn read_plan(
    cache: &TailCache,
    distant: bool,
    key: &str,
    object_size: u64,
    span: &Range<u64>,
) -> ReadPlan {
    if by_span(cache, distant, key, object_size, span) {
        ReadPlan {
            cache_key: part_key(key, span),
            range: Some(span.clone()),
            size: span.end - span.start,
        }
    } else {
        ReadPlan::whole(key, object_size)
    }
}

/// Whether a read of `span` of object `key` goes by span rather than
/// whole: the object is too large to read whole; or the span is large
/// enough for a GET of its own and either the object is a ghost (read whole
/// once and evicted, so its readers are far apart), or the store is distant
/// and the span at least [`DISTANT_SPAN_READ_BYTES_MIN`], or whole objects
/// lately left the cache with less than [`WHOLE_USE_MIN`] of their bytes
/// read (one in [`WHOLE_USE_SAMPLE_EVERY`] still read whole, to notice when
/// readers keep together again).
fn by_span(
    read_cache: &TailCache,
    distant: bool,
    key: &str,
    object_size: u64,
    span: &Range<u64>,
) -> bool {
    if object_size > WHOLE_OBJECT_READ_BYTES_MAX {
        return true;
    }
    let len = span.end - span.start;
    if len < SPAN_READ_BYTES_MIN {
        return false;
    }
    read_cache.is_ghost(key)
        || (distant && len >= DISTANT_SPAN_READ_BYTES_MIN)
        || (read_cache.whole_use() < WHOLE_USE_MIN && !sampled(key))
}

/// Whether `key` is one of the objects read whole to measure
/// [`TailCache::whole_use`] (the same answer for every reader of it).
fn sampled(key: &str) -> bool {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish().is_multiple_of(WHOLE_USE_SAMPLE_EVERY)
}

/// The read cache's key for `range` of object `key` read by span.
fn part_key(key: &str, range: &Range<u64>) -> String {
    format!("{key}#{}+{}", range.start, range.end - range.start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn objects_evicted_after_a_read_are_read_by_span_afterwards() {
        const KIB: u64 = 1 << 10;
        const SIZE: u64 = 512 * KIB;
        let store = Arc::new(object_store::memory::InMemory::new());
        // The read cache holds one object.
        let cache = (SIZE + SIZE / 2) as usize;
        let (storage, _thread) = Storage::start(store, Path::from("t"), 0, cache).unwrap();
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let body = |k: u8| Bytes::from((0..SIZE).map(|i| k ^ (i % 251) as u8).collect::<Vec<_>>());
        let span = |n: u64| n * 128 * KIB..(n + 1) * 128 * KIB;
        futures::executor::block_on(async {
            for k in [1u8, 2] {
                storage.put(k.to_string(), vec![body(k)]).await.unwrap();
            }
            let read = |key: &str, r: Range<u64>| storage.get_range(key.into(), r, SIZE);
            let slice = |k: u8, r: Range<u64>| body(k).slice(r.start as usize..r.end as usize);
            assert_eq!(
                read("1", span(0)).await.unwrap().0.concat(),
                slice(1, span(0))
            );
            assert_eq!(
                read("2", span(0)).await.unwrap().0.concat(),
                slice(2, span(0))
            );
            assert_eq!(count(&storage.stats.get_bytes), 2 * SIZE, "both read whole");
            // "1" was read and evicted: its readers are far apart, so a
            // later read of it fetches the span alone, and caches it.
            assert_eq!(
                read("1", span(1)).await.unwrap().0.concat(),
                slice(1, span(1))
            );
            assert_eq!(count(&storage.stats.span_gets), 1);
            assert_eq!(count(&storage.stats.get_bytes), 2 * SIZE + 128 * KIB);
            assert_eq!(
                read("1", span(1)).await.unwrap().0.concat(),
                slice(1, span(1))
            );
            assert_eq!(
                count(&storage.stats.get_bytes),
                2 * SIZE + 128 * KIB,
                "cached"
            );
            // Read-ahead of a ghost reads the span, not the object.
            storage.prefetch("1", SIZE, span(2));
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while count(&storage.stats.span_gets) < 2
                || storage.read_ahead_bytes.load(Ordering::Relaxed) > 0
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "read-ahead never finished"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(count(&storage.stats.get_bytes), 2 * SIZE + 256 * KIB);
            let hits = count(&storage.stats.read_cache_hits);
            assert_eq!(
                read("1", span(2)).await.unwrap().0.concat(),
                slice(1, span(2))
            );
            assert_eq!(count(&storage.stats.read_cache_hits), hits + 1);
            // A span too small for a GET of its own: the object is read
            // whole again.
            assert_eq!(
                read("1", 10..20).await.unwrap().0.concat(),
                slice(1, 10..20)
            );
            assert_eq!(count(&storage.stats.span_gets), 2);
            assert_eq!(count(&storage.stats.get_bytes), 3 * SIZE + 256 * KIB);
            // A range past the end is still refused.
            assert!(matches!(
                read("2", SIZE - 10..SIZE + 10).await,
                Err(StorageError::ShortObject { .. })
            ));
        });
    }

    #[test]
    fn a_distant_store_reads_large_spans_by_themselves() {
        const MIB: u64 = 1 << 20;
        const SIZE: u64 = 4 * MIB;
        let store = Arc::new(object_store::memory::InMemory::new());
        let (storage, _thread) =
            Storage::start(store, Path::from("t"), 0, 4 * SIZE as usize).unwrap();
        let storage = storage.distant();
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let body = Bytes::from((0..SIZE).map(|i| (i % 253) as u8).collect::<Vec<_>>());
        let slice = |r: Range<u64>| body.slice(r.start as usize..r.end as usize);
        // An object sampled for whole_use is read by span all the same.
        let key = (0u32..)
            .map(|k| k.to_string())
            .find(|k| sampled(k))
            .unwrap();
        futures::executor::block_on(async {
            storage.put(key.clone(), vec![body.clone()]).await.unwrap();
            let read = |r: Range<u64>| storage.get_range(key.clone(), r, SIZE);
            assert_eq!(read(0..MIB).await.unwrap().0.concat(), slice(0..MIB));
            assert_eq!(count(&storage.stats.span_gets), 1);
            assert_eq!(count(&storage.stats.get_bytes), MIB);
            // A shorter span: the object whole, as on a local store.
            assert_eq!(
                read(MIB..2 * MIB - 1).await.unwrap().0.concat(),
                slice(MIB..2 * MIB - 1)
            );
            assert_eq!(count(&storage.stats.span_gets), 1);
            assert_eq!(count(&storage.stats.get_bytes), MIB + SIZE);
        });
        // The same rule without the storage: local stores read the span's
        // object whole while whole objects are read through.
        let cache = TailCache::new(1);
        let span = 0..DISTANT_SPAN_READ_BYTES_MIN;
        assert!(by_span(&cache, true, "o", SIZE, &span));
        assert!(!by_span(&cache, false, "o", SIZE, &span));
        assert!(!by_span(
            &cache,
            true,
            "o",
            SIZE,
            &(0..DISTANT_SPAN_READ_BYTES_MIN - 1)
        ));
    }

    /// On a distant store an object's short spans are read whole and its
    /// long ones by themselves: a long span read while the whole object is
    /// on its way joins that read instead of fetching its bytes again.
    #[test]
    fn a_span_joins_the_whole_read_of_its_object_in_flight() {
        const MIB: u64 = 1 << 20;
        const SIZE: u64 = 4 * MIB;
        let latency = InjectedLatency {
            base: Duration::from_millis(200),
            jitter: Duration::ZERO,
        };
        let store = with_injected_latency(Arc::new(object_store::memory::InMemory::new()), latency);
        let (storage, _thread) =
            Storage::start(store, Path::from("t"), 0, 4 * SIZE as usize).unwrap();
        let storage = storage.distant();
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let body = Bytes::from((0..SIZE).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        futures::executor::block_on(async {
            storage.put("o".into(), vec![body.clone()]).await.unwrap();
            // The short span starts the whole read before the long one asks.
            let short = storage.get_range("o".into(), 0..1000, SIZE);
            let long = storage.get_range("o".into(), MIB..3 * MIB, SIZE);
            let (short, long) = futures::join!(short, long);
            assert_eq!(short.unwrap().0.concat(), body.slice(0..1000));
            assert_eq!(
                long.unwrap().0.concat(),
                body.slice(MIB as usize..3 * MIB as usize)
            );
        });
        assert_eq!(count(&storage.stats.gets), 1, "one GET: the whole object");
        assert_eq!(count(&storage.stats.span_gets), 0);
        assert_eq!(count(&storage.stats.read_joins), 1);
    }

    /// A GET's chunks are kept when they are read blocks (all but the last
    /// at least half a block), joined when they are small frames.
    #[test]
    fn gather_keeps_blocks_and_joins_small_frames() {
        let result = |chunks: Vec<Bytes>| {
            let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
            GetResult {
                payload: GetResultPayload::Stream(futures::StreamExt::boxed(
                    futures::stream::iter(chunks.into_iter().map(Ok::<_, object_store::Error>)),
                )),
                meta: object_store::ObjectMeta {
                    location: Path::from("o"),
                    last_modified: chrono::Utc::now(),
                    size: len,
                    e_tag: None,
                    version: None,
                },
                range: 0..len,
                attributes: Default::default(),
                extensions: Default::default(),
            }
        };
        let block = Bytes::from(vec![1u8; READ_BLOCK_BYTES]);
        let tail = Bytes::from(vec![2u8; 100]);
        futures::executor::block_on(async {
            let kept = gather(result(vec![block.clone(), block.clone(), tail.clone()]), 0)
                .await
                .unwrap();
            assert_eq!(kept.len(), 3);
            assert_eq!(kept[0].as_ptr(), block.as_ptr(), "not copied");
            let frames: Vec<Bytes> = (0..5u8).map(|i| Bytes::from(vec![i; 8192])).collect();
            let joined = gather(result(frames.clone()), 5 * 8192).await.unwrap();
            assert_eq!(joined.len(), 1);
            assert_eq!(joined[0], frames.concat());
            let mixed = gather(result(vec![block.clone(), tail.clone(), block.clone()]), 0)
                .await
                .unwrap();
            assert_eq!(
                mixed,
                vec![Bytes::from([&block[..], &tail[..], &block[..]].concat())]
            );
        });
    }

    #[test]
    fn reads_in_flight_stay_within_their_byte_bound() {
        // Nine whole-object reads of 16 MiB at once: eight fit in
        // READS_INFLIGHT_BYTES_MAX (128 MiB) and go through the read cache;
        // the ninth reads its range alone instead of a ninth object.
        const SIZE: u64 = WHOLE_OBJECT_READ_BYTES_MAX;
        const OBJECTS: u64 = READS_INFLIGHT_BYTES_MAX as u64 / SIZE + 1;
        let latency = InjectedLatency {
            base: Duration::from_millis(300),
            jitter: Duration::ZERO,
        };
        let store = with_injected_latency(Arc::new(object_store::memory::InMemory::new()), latency);
        let (storage, _thread) =
            Storage::start(store, Path::from("t"), 0, 2 * READS_INFLIGHT_BYTES_MAX).unwrap();
        let body = Bytes::from(vec![5u8; SIZE as usize]);
        futures::executor::block_on(async {
            let puts = (0..OBJECTS).map(|k| storage.put(k.to_string(), vec![body.clone()]));
            for put in futures::future::join_all(puts).await {
                put.unwrap();
            }
            // All nine start (and claim their bytes) before any GET ends.
            let reads = (0..OBJECTS).map(|k| storage.get_range(k.to_string(), 0..4096, SIZE));
            for r in futures::future::join_all(reads).await {
                assert_eq!(r.unwrap().0.concat(), body.slice(0..4096));
            }
        });
        assert_eq!(
            storage.stats.get_bytes.load(Ordering::Relaxed),
            (OBJECTS - 1) * SIZE + 4096,
            "eight objects whole, the ninth's range alone"
        );
        assert_eq!(storage.reading_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn read_ahead_stays_within_its_share_of_the_read_cache() {
        let store = Arc::new(object_store::memory::InMemory::new());
        // No tail cache (puts are not cached); a 1000-byte read cache, so
        // read-ahead may hold 500 bytes.
        let (storage, _thread) = Storage::start(store, Path::from("t"), 0, 1000).unwrap();
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        futures::executor::block_on(async {
            for k in ["a", "b", "c"] {
                storage
                    .put(k.into(), vec![Bytes::from(vec![7u8; 300])])
                    .await
                    .unwrap();
            }
            storage.prefetch("a", 300, 0..300);
            storage.prefetch("b", 300, 0..300);
            assert_eq!(count(&storage.stats.prefetches), 1);
            assert_eq!(
                count(&storage.stats.prefetches_refused),
                1,
                "300 + 300 > 500"
            );
            // A consumer reads "a": no longer ahead, so there is room again.
            let (got, _) = storage.get_range("a".into(), 0..10, 300).await.unwrap();
            assert_eq!(got.concat(), vec![7u8; 10]);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while storage.read_ahead_bytes.load(Ordering::Relaxed) > 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "read-ahead never finished"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            storage.prefetch("c", 300, 0..300);
            assert_eq!(count(&storage.stats.prefetches), 2);
            assert_eq!(count(&storage.stats.prefetches_refused), 1);
        });
    }
}
