//! A shard's open batch buffer: validated batches of every topic and
//! partition, in arrival order, until the buffer's window ends on the grid
//! (or it reaches `flush_bytes`, or a request finds the pipeline idle);
//! then it is sealed and sent towards the pipeline. Shared-nothing: one per
//! shard, never borrowed across an `.await`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::channel::{mpsc, oneshot};
use futures::future::{FutureExt, Shared};
use futures::StreamExt;
use indexmap::IndexMap;
use rutomq_meta::{BatchRef, ProducerFields};
use uuid::Uuid;

use super::pipeline::{Sealed, SealedPart, WindowOutcome};
use super::{Flush, OnItsWay, SealedTx};
use crate::error::ErrorCode;
use crate::records::BatchInfo;

/// Why a buffer is sealed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seal {
    /// Its grid window ended.
    Grid,
    /// It reached the seal size.
    Full,
    /// A request was appended while the pipeline was idle.
    Idle,
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
    /// [`super::WindowMembers::announce`]), once its timer is armed.
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

/// The open buffer of one shard, and its way to the pipeline.
pub struct ShardBuffer {
    flush: Arc<Flush>,
    open: RefCell<OpenBuffer>,
    /// Sealed buffers in seal order, towards the agent's bounded sealed
    /// queue. Unbounded in count, bounded in bytes: a sealed buffer holds
    /// only batches of admitted requests, and a request keeps its share of
    /// the shard's admission budget (`--shard-memory-bytes`) until it is
    /// answered, which is after its buffer left this queue. When the
    /// pipeline is behind, the budget runs out and the shard stops reading
    /// sockets.
    seal_tx: mpsc::UnboundedSender<Sealed>,
}

impl ShardBuffer {
    pub fn new(flush: Arc<Flush>, sealed_tx: SealedTx) -> Rc<ShardBuffer> {
        let (seal_tx, mut seal_rx) = mpsc::unbounded::<Sealed>();
        // Forward sealed buffers in seal order; a full pipeline queue holds
        // them here, and the shard's memory budget stops the sockets.
        rutomq_shards::spawn(async move {
            while let Some(s) = seal_rx.next().await {
                if let Err(e) = sealed_tx.send(s).await {
                    e.0.answer(Err(ErrorCode::KafkaStorageError));
                }
            }
        });
        Rc::new(ShardBuffer {
            flush,
            open: RefCell::new(OpenBuffer::new(0)),
            seal_tx,
        })
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
        let (done, part_idx, batch_idx, seal_now) = {
            let mut buf = self.open.borrow_mut();
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
                    transactional: info.transactional,
                }),
            });
            part.chunks.push(bytes);
            buf.bytes += len;
            (
                buf.done.clone(),
                part_idx,
                batch_idx,
                buf.bytes >= self.flush.stretch.seal_bytes(self.flush.flush_bytes),
            )
        };
        if seal_now {
            self.seal(Seal::Full);
        }
        (done, part_idx, batch_idx)
    }

    /// A request's batches are all appended (every caller of
    /// [`Self::append`] calls this before its next await): the open buffer
    /// is sealed now while none of the agent's buffers is on its way
    /// (`--flush-when-idle`), so a lone request does not wait for the grid;
    /// otherwise it is armed for its window's end, if it is not yet, and
    /// the grid gathers requests as before (group commit).
    pub fn appended(self: &Rc<Self>) {
        let (bytes, armed) = {
            let buf = self.open.borrow();
            (buf.bytes, buf.window.is_some())
        };
        if bytes == 0 {
            return;
        }
        if self.flush.when_idle && self.flush.idle() {
            self.flush.stages.idle_seals.fetch_add(1, Ordering::Relaxed);
            self.seal(Seal::Idle);
        } else if !armed {
            self.arm();
        }
    }

    /// Announces the open buffer for the next grid window and seals it when
    /// that window ends (unless it was sealed before).
    fn arm(self: &Rc<Self>) {
        let (wait, window) = self
            .flush
            .clock
            .until_next_window(self.flush.stretch.stride());
        let generation = {
            let mut buf = self.open.borrow_mut();
            buf.window = Some(window);
            buf.generation
        };
        self.flush.members.announce(window);
        let me = self.clone();
        rutomq_shards::spawn(async move {
            rutomq_shards::sleep(wait).await;
            if me.open.borrow().generation == generation {
                me.seal(Seal::Grid);
            }
        });
    }

    /// Seals the open buffer and sends it towards the pipeline.
    fn seal(&self, why: Seal) {
        let sealed = {
            let mut buf = self.open.borrow_mut();
            if buf.bytes == 0 {
                return;
            }
            let next = OpenBuffer::new(buf.generation + 1);
            let old = std::mem::replace(&mut *buf, next);
            // Sealed before its window (flush_bytes reached, or the pipeline
            // idle): it travels alone, and the window no longer waits for it.
            let window = match old.window {
                Some(w) if why != Seal::Grid => {
                    self.flush.members.withdraw(w);
                    None
                }
                Some(w) => {
                    let late = self.flush.clock.window_end(w).elapsed();
                    self.flush.stages.seal_late.observe(late);
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
                alone: why == Seal::Idle,
                on_its_way: OnItsWay::new(&self.flush),
            }
        };
        if let Err(e) = self.seal_tx.unbounded_send(sealed) {
            e.into_inner().answer(Err(ErrorCode::KafkaStorageError));
        }
    }
}
