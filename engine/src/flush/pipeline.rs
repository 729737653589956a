//! The flush pipeline: sealed shard buffers → one object per window → one
//! commit per window, in window order → answers to the shards.
//!
//! Runs on the storage runtime. Shards seal their buffers on a shared clock
//! grid (every `flush_interval`), so the buffers of one window arrive within
//! microseconds of each other; the pipeline gathers what arrives within
//! `gather` of the first one (or until `flush_bytes`) into ONE object; a
//! buffer sealed because the pipeline was idle is taken with what is queued
//! already, without waiting. Uploads
//! overlap (up to [`UPLOADS_INFLIGHT_MAX`]); commits are submitted strictly in
//! window order, so a producer's batches keep their order across windows.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use rutomq_meta::{BatchOutcome, BatchRef, Meta, ObjectCommit, PartitionAppend};
use rutomq_storage::Storage;
use uuid::Uuid;

use super::{Flush, WindowStages};
use crate::error::ErrorCode;
use crate::limits::UPLOADS_INFLIGHT_MAX;

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
    /// The grid window it was sealed for; None when sealed early (full,
    /// or the pipeline idle).
    pub window: Option<u64>,
    /// Sealed at once because the pipeline was idle: gathered with what is
    /// already queued, without waiting for more.
    pub alone: bool,
    pub on_its_way: super::OnItsWay,
}

impl Sealed {
    /// Answers every produce request in the buffer. The buffer stops
    /// counting as on its way first: the client's next request, sent on
    /// this answer, must find the pipeline idle.
    pub fn answer(mut self, outcome: WindowOutcome) {
        self.on_its_way.settle();
        let _ = self.reply.send(outcome);
    }
}

/// Called with new high watermarks and the new spans after each local commit.
pub type OnCommit = Arc<dyn Fn(&rutomq_meta::Watermarks, Vec<NewSpan>) + Send + Sync>;

/// A span this agent just committed, for the shards' span caches.
pub type NewSpan = rutomq_meta::CommittedSpan;

pub struct Pipeline {
    pub storage: Storage,
    pub meta: Meta,
    pub agent_id: i32,
    pub gather: Duration,
    pub on_commit: OnCommit,
    /// Uploads not committed within this are refused (see `gc`).
    pub commit_age_max: Duration,
    pub flush: Arc<Flush>,
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
        self.flush.stages.windows.fetch_add(1, Ordering::Relaxed);
        WindowStages::add(
            &self.flush.stages.queued_us,
            &self.flush.stages.queued,
            taken.duration_since(first.sealed_at),
        );
        let grid = first.window;
        let mut members = u64::from(grid.is_some());
        let mut bytes = first.bytes;
        let alone = first.alone;
        let mut window = vec![first];
        let deadline = tokio::time::Instant::now() + self.gather;
        // Gathers up to flush_bytes, not the scaled buffer size: a buffer
        // grown under commit pressure travels alone, so objects stay small
        // enough to be read back whole (WHOLE_OBJECT_READ_BYTES_MAX in storage).
        while bytes < self.flush.flush_bytes {
            if let Some(w) = grid {
                if members >= self.flush.members.expected(w) {
                    break; // every shard of this window is here
                }
            }
            // A buffer sealed alone takes only what is queued already (a
            // timeout, even of zero, waits for the timer's next tick: 1 ms).
            let next = if alone {
                rx.try_recv().ok()
            } else {
                tokio::time::timeout_at(deadline, rx.recv())
                    .await
                    .ok()
                    .flatten()
            };
            match next {
                Some(s) => {
                    match s.window {
                        Some(w) if Some(w) == grid => members += 1,
                        // Another window's buffer rides along; it is taken.
                        Some(w) => self.flush.members.gathered(w, 1),
                        None => {}
                    }
                    bytes += s.bytes;
                    window.push(s);
                }
                None => break,
            }
        }
        if let Some(w) = grid {
            self.flush.members.gathered(w, members);
        }
        let parts = window.iter().map(|s| s.parts.len()).sum();
        self.flush.stretch.observe(grid, bytes, parts);
        WindowStages::add(
            &self.flush.stages.gather_us,
            &self.flush.stages.gather,
            taken.elapsed(),
        );
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
        let flush = self.flush.clone();
        async move {
            let started = Instant::now();
            let result = storage.put(key, chunks).await.map_err(|e| {
                tracing::warn!(error = %e, "object upload failed; failing its produce requests (retriable)");
                ErrorCode::from(&e)
            });
            WindowStages::add(
                &flush.stages.upload_us,
                &flush.stages.upload,
                started.elapsed(),
            );
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
                s.answer(Err(code));
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
                    s.answer(Err(ErrorCode::from(e.as_ref())));
                }
                return;
            }
        };
        let on_commit = self.on_commit.clone();
        let flush = self.flush.clone();
        flush.stretch.commit_submitted();
        tokio::spawn(async move {
            let outcome = receiver.await;
            flush.stretch.commit_answered();
            WindowStages::add(
                &flush.stages.commit_us,
                &flush.stages.commit,
                uploaded_at.elapsed(),
            );
            let (mut outcomes, news) = match outcome {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => {
                    for s in window {
                        s.answer(Err(ErrorCode::from(e.as_ref())));
                    }
                    return;
                }
                Err(_) => {
                    for s in window {
                        s.answer(Err(ErrorCode::KafkaStorageError));
                    }
                    return;
                }
            };
            // The news of every window committed with this one, told once
            // (see `rutomq_meta::CommitNews`), before its producers hear.
            news.tell_once(|watermarks, spans| on_commit(watermarks, spans));
            let watermarks = &news.watermarks;
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
                    s.answer(Err(ErrorCode::UnknownServerError));
                }
                return;
            }
            // None of the window's buffers is on its way any more, before
            // the first answer goes out.
            let mut window = window;
            window.iter_mut().for_each(|s| s.on_its_way.settle());
            let mut rest = outcomes.drain(..).zip(appends);
            for (s, n) in window.into_iter().zip(parts) {
                let mine: Vec<PartOutcome> = rest
                    .by_ref()
                    .take(n)
                    .map(|(batches, tp)| PartOutcome {
                        batches,
                        log_start_offset: watermarks.get(&tp).map_or(0, |w| w.log_start_offset),
                    })
                    .collect();
                s.answer(Ok(Arc::new(mine)));
            }
        });
    }
}
