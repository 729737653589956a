//! The flush pipeline: sealed shard buffers → one object per window → one
//! commit per window, in window order → answers to the shards.
//!
//! Runs on the storage runtime. Shards seal their buffers on a shared clock
//! grid (every `flush_interval`), so the buffers of one window arrive within
//! microseconds of each other; the pipeline gathers what arrives within
//! `gather` of the first one (or until `flush_bytes`) into ONE object. Uploads
//! overlap (up to [`UPLOADS_INFLIGHT_MAX`]); commits are submitted strictly in
//! window order, so a producer's batches keep their order across windows.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use rutomq_meta::{BatchOutcome, BatchRef, Meta, ObjectCommit, PartitionAppend};
use rutomq_storage::Storage;
use uuid::Uuid;

use crate::error::ErrorCode;
use crate::metrics::StageHistogram;

/// Uploads in flight at once; past it the pipeline stops taking sealed
/// buffers, the sealed queue fills and shards stop reading sockets.
pub const UPLOADS_INFLIGHT_MAX: usize = 64;
/// Sealed buffers queued towards the pipeline (all shards).
pub const SEALED_QUEUE_MAX: usize = 256;

/// The batches of one partition in one sealed shard buffer.
pub struct SealedPart {
    pub topic_id: Uuid,
    pub partition: i32,
    pub chunks: Vec<Bytes>,
    /// `byte_start` relative to the first chunk of this part.
    pub batches: Vec<BatchRef>,
}

/// What one partition of a sealed buffer became.
#[derive(Clone, Debug)]
pub struct PartOutcome {
    pub batches: Vec<BatchOutcome>,
    pub log_start_offset: i64,
}

/// Outcome of a sealed buffer, per part in seal order.
pub type WindowOutcome = Result<Arc<Vec<PartOutcome>>, ErrorCode>;

pub struct Sealed {
    pub parts: Vec<SealedPart>,
    pub bytes: usize,
    pub reply: oneshot::Sender<WindowOutcome>,
    pub sealed_at: std::time::Instant,
    /// The grid window it was sealed for; None when sealed early (full).
    pub window: Option<u64>,
}

/// Windows tracked at once (a ring; windows further apart than this never
/// overlap in the pipeline's gather).
const WINDOW_SLOTS: usize = 64;

/// How many shards armed a buffer for each grid window: the pipeline stops
/// gathering a window as soon as all of them arrived, instead of waiting
/// out the gather time for shards that had nothing to send.
pub struct WindowMembers {
    slots: [AtomicU64; WINDOW_SLOTS],
}

impl Default for WindowMembers {
    fn default() -> Self {
        WindowMembers {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl WindowMembers {
    fn slot(&self, window: u64) -> &AtomicU64 {
        &self.slots[(window % WINDOW_SLOTS as u64) as usize]
    }
    /// A shard will seal a buffer at the end of `window`.
    pub fn announce(&self, window: u64) {
        self.slot(window).fetch_add(1, Ordering::Relaxed);
    }
    /// ... after all, it sealed early.
    pub fn withdraw(&self, window: u64) {
        self.slot(window).fetch_sub(1, Ordering::Relaxed);
    }
    fn expected(&self, window: u64) -> u64 {
        self.slot(window).load(Ordering::Relaxed)
    }
    fn gathered(&self, window: u64, n: u64) {
        self.slot(window).fetch_sub(n, Ordering::Relaxed);
    }
}

/// Where a window's time goes, summed over windows (for `/metrics`):
/// sealed → taken by the pipeline → gathered → uploaded → committed.
#[derive(Default, Debug)]
pub struct WindowStages {
    pub windows: AtomicU64,
    pub queued_us: AtomicU64,
    pub gather_us: AtomicU64,
    pub upload_us: AtomicU64,
    pub commit_us: AtomicU64,
    /// The same stages per window, as histograms (for their tails).
    pub queued: StageHistogram,
    pub gather: StageHistogram,
    pub upload: StageHistogram,
    pub commit: StageHistogram,
    /// How late a shard sealed its buffer after its window's end on the
    /// grid (the shard's timer; the only part of a record's wait for its
    /// window that is not the flush interval itself).
    pub seal_late: StageHistogram,
}

impl WindowStages {
    fn add(counter: &AtomicU64, histogram: &StageHistogram, took: Duration) {
        counter.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        histogram.observe(took);
    }

    /// `/metrics` lines of the stage histograms.
    pub fn render(&self, out: &mut String) {
        let name = "rutomq_window_stage_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Flush windows by stage: a shard buffer sealed after its window's end (seal_late, per buffer), sealed until taken (queued), gathering the shards' buffers (gather), object upload (upload), uploaded until committed in order (commit).\n# TYPE {name} histogram"
        );
        for (stage, h) in [
            ("seal_late", &self.seal_late),
            ("queued", &self.queued),
            ("gather", &self.gather),
            ("upload", &self.upload),
            ("commit", &self.commit),
        ] {
            h.render(out, name, stage);
        }
    }
}

/// Called with new high watermarks and the new spans after each local commit.
pub type OnCommit = Arc<dyn Fn(&rutomq_meta::Watermarks, Vec<NewSpan>) + Send + Sync>;

/// A span this agent just committed, for the shards' span caches.
pub type NewSpan = ((Uuid, i32), rutomq_meta::SpanRecord);

pub struct Pipeline {
    pub storage: Storage,
    pub meta: Meta,
    pub agent_id: i32,
    pub gather: Duration,
    pub flush_bytes: usize,
    pub on_commit: OnCommit,
    /// Uploads not committed within this are refused (see `gc`).
    pub commit_age_max: Duration,
    pub stages: Arc<WindowStages>,
    pub windows: Arc<WindowMembers>,
}

struct Uploaded {
    window: Vec<Sealed>,
    object: ObjectCommit,
    result: Result<(), ErrorCode>,
    uploaded_at: Instant,
}

impl Pipeline {
    pub async fn run(self, mut rx: tokio::sync::mpsc::Receiver<Sealed>) {
        let mut uploads = FuturesOrdered::new();
        let mut open = true;
        while open || !uploads.is_empty() {
            tokio::select! {
                first = rx.recv(), if open && uploads.len() < UPLOADS_INFLIGHT_MAX => {
                    let Some(first) = first else { open = false; continue };
                    let window = self.gather_window(first, &mut rx).await;
                    uploads.push_back(self.upload(window));
                }
                Some(done) = uploads.next(), if !uploads.is_empty() => {
                    self.commit(done).await;
                }
            }
        }
    }

    async fn gather_window(
        &self,
        first: Sealed,
        rx: &mut tokio::sync::mpsc::Receiver<Sealed>,
    ) -> Vec<Sealed> {
        let taken = Instant::now();
        self.stages.windows.fetch_add(1, Ordering::Relaxed);
        WindowStages::add(
            &self.stages.queued_us,
            &self.stages.queued,
            taken.duration_since(first.sealed_at),
        );
        let grid = first.window;
        let mut members = u64::from(grid.is_some());
        let mut bytes = first.bytes;
        let mut window = vec![first];
        let deadline = tokio::time::Instant::now() + self.gather;
        while bytes < self.flush_bytes {
            if let Some(w) = grid {
                if members >= self.windows.expected(w) {
                    break; // every shard of this window is here
                }
            }
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(s)) => {
                    match s.window {
                        Some(w) if Some(w) == grid => members += 1,
                        // Another window's buffer rides along; it is taken.
                        Some(w) => self.windows.gathered(w, 1),
                        None => {}
                    }
                    bytes += s.bytes;
                    window.push(s);
                }
                _ => break,
            }
        }
        if let Some(w) = grid {
            self.windows.gathered(w, members);
        }
        WindowStages::add(&self.stages.gather_us, &self.stages.gather, taken.elapsed());
        window
    }

    fn upload(
        &self,
        mut window: Vec<Sealed>,
    ) -> impl std::future::Future<Output = Uploaded> + 'static {
        let key = self.storage.new_object_key(self.agent_id);
        self.storage
            .stats
            .sealed_buffers
            .fetch_add(window.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let mut chunks = Vec::new();
        let mut appends = Vec::new();
        let mut offset = 0u64;
        for sealed in &mut window {
            for part in &mut sealed.parts {
                let batches = std::mem::take(&mut part.batches)
                    .into_iter()
                    .map(|mut b| {
                        b.byte_start += offset;
                        b
                    })
                    .collect();
                offset += part.chunks.iter().map(|c| c.len() as u64).sum::<u64>();
                chunks.append(&mut part.chunks);
                appends.push(PartitionAppend {
                    topic_id: part.topic_id,
                    partition: part.partition,
                    batches,
                });
            }
        }
        let object = ObjectCommit {
            object_key: key.clone(),
            size_bytes: offset,
            agent_id: self.agent_id,
            appends,
            commit_deadline: std::time::Instant::now() + self.commit_age_max,
        };
        let storage = self.storage.clone();
        let stages = self.stages.clone();
        async move {
            let started = Instant::now();
            let result = storage.put(key, chunks).await.map_err(|e| {
                tracing::warn!(error = %e, "object upload failed; failing its produce requests (retriable)");
                ErrorCode::from(&e)
            });
            WindowStages::add(&stages.upload_us, &stages.upload, started.elapsed());
            Uploaded {
                window,
                object,
                result,
                uploaded_at: Instant::now(),
            }
        }
    }

    async fn commit(&self, done: Uploaded) {
        let Uploaded {
            window,
            object,
            result,
            uploaded_at,
        } = done;
        if let Err(code) = result {
            for s in window {
                let _ = s.reply.send(Err(code));
            }
            return;
        }
        let parts: Vec<usize> = window.iter().map(|s| s.parts.len()).collect();
        let appends: Vec<(Uuid, i32)> = object
            .appends
            .iter()
            .map(|a| (a.topic_id, a.partition))
            .collect();
        // Enqueue now, in window order; wait for the outcome elsewhere.
        let receiver = match self.meta.submit_commit(object).await {
            Ok(r) => r,
            Err(e) => {
                for s in window {
                    let _ = s.reply.send(Err(ErrorCode::from(e.as_ref())));
                }
                return;
            }
        };
        let on_commit = self.on_commit.clone();
        let stages = self.stages.clone();
        tokio::spawn(async move {
            let outcome = receiver.await;
            WindowStages::add(&stages.commit_us, &stages.commit, uploaded_at.elapsed());
            let (mut outcomes, watermarks, spans) = match outcome {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => {
                    for s in window {
                        let _ = s.reply.send(Err(ErrorCode::from(e.as_ref())));
                    }
                    return;
                }
                Err(_) => {
                    for s in window {
                        let _ = s.reply.send(Err(ErrorCode::KafkaStorageError));
                    }
                    return;
                }
            };
            on_commit(&watermarks, spans);
            if outcomes.len() != appends.len() {
                // The committer answers one outcome list per append; anything
                // else is a bug. The records are committed, but which batch
                // got which offset is unknown: fail the requests (the client
                // retries; an idempotent producer sees a duplicate).
                tracing::error!(
                    outcomes = outcomes.len(),
                    appends = appends.len(),
                    "window commit answered the wrong number of appends"
                );
                for s in window {
                    let _ = s.reply.send(Err(ErrorCode::UnknownServerError));
                }
                return;
            }
            let mut rest = outcomes.drain(..).zip(appends);
            for (s, n) in window.into_iter().zip(parts) {
                let mine: Vec<PartOutcome> = rest
                    .by_ref()
                    .take(n)
                    .map(|(batches, tp)| PartOutcome {
                        batches,
                        log_start_offset: watermarks.get(&tp).map_or(0, |w| w.1),
                    })
                    .collect();
                let _ = s.reply.send(Ok(Arc::new(mine)));
            }
        });
    }
}
