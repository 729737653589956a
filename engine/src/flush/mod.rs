//! The flush window: how a produced batch becomes durable.
//!
//! In the order a batch travels: the Produce handler appends it to its
//! shard's open buffer ([`buffer`]); when the buffer's window ends on the
//! agent's clock grid ([`clock`]), or it reaches `flush_bytes`, or the
//! request finds none of the agent's buffers on its way (`--flush-when-idle`:
//! a lone request does not wait for the grid), the buffer is sealed and
//! queued to the pipeline ([`pipeline`]), which gathers the buffers of
//! every shard in that window ([`members`] says how many to wait for; a
//! buffer sealed when idle takes only what is queued already) into one
//! object, uploads it (storage), commits it in window order (meta), and
//! answers the buffer's outcome, which every produce request in it awaits.
//! [`stages`] times each step for `/metrics`.

pub mod buffer;
pub mod clock;
pub mod members;
pub mod pipeline;
pub mod stages;
pub mod stretch;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use buffer::{BufferDone, ShardBuffer};
pub use clock::WindowClock;
pub use members::WindowMembers;
pub use pipeline::{NewSpan, PartOutcome, Pipeline, Sealed, SealedPart, WindowOutcome};
pub use stages::WindowStages;
pub use stretch::Stretch;

use crate::limits::SEALED_QUEUE_MAX;

/// The agent-wide half of the flush window, shared by every shard's buffer
/// and the pipeline.
pub struct Flush {
    pub clock: WindowClock,
    /// A shard buffer this large is sealed before its window ends.
    pub flush_bytes: usize,
    /// Which shards will seal a buffer in each window.
    pub members: WindowMembers,
    /// Time spent per flush-window stage.
    pub stages: WindowStages,
    /// How many grid intervals a window spans now (adaptive flush).
    pub stretch: Stretch,
    /// Seal a request's batches at once while no buffer is on its way
    /// (`--flush-when-idle`).
    pub when_idle: bool,
    /// Shard buffers sealed and not answered yet (see [`OnItsWay`]).
    on_its_way: AtomicU64,
}

impl Flush {
    /// Windows of `flush_interval`, stretched up to `flush_interval_max`
    /// while traffic is low.
    pub fn new(
        flush_interval: Duration,
        flush_interval_max: Duration,
        flush_bytes: usize,
        when_idle: bool,
    ) -> Arc<Flush> {
        let stride_max = flush_interval_max.as_nanos() / flush_interval.as_nanos().max(1);
        Arc::new(Flush {
            clock: WindowClock::new(flush_interval),
            flush_bytes,
            members: WindowMembers::default(),
            stages: WindowStages::default(),
            stretch: Stretch::new(stride_max.try_into().unwrap_or(u64::MAX)),
            when_idle,
            on_its_way: AtomicU64::new(0),
        })
    }

    /// Whether no shard buffer of this agent is between its seal and its
    /// answer.
    pub fn idle(&self) -> bool {
        self.on_its_way.load(Ordering::Relaxed) == 0
    }
}

/// Counts a sealed buffer as on its way until it is settled, just before
/// its answer is sent ([`Sealed::answer`]), or dropped (given up): held by
/// [`Sealed`].
pub struct OnItsWay(Option<Arc<Flush>>);

impl OnItsWay {
    pub fn new(flush: &Arc<Flush>) -> OnItsWay {
        flush.on_its_way.fetch_add(1, Ordering::Relaxed);
        OnItsWay(Some(flush.clone()))
    }

    /// No longer on its way (once; later calls and the drop do nothing).
    pub fn settle(&mut self) {
        if let Some(flush) = self.0.take() {
            flush.on_its_way.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for OnItsWay {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Sealed buffers of all shards towards the pipeline.
pub type SealedTx = tokio::sync::mpsc::Sender<Sealed>;

/// The sealed queue: every shard buffer holds a sender, [`Pipeline::run`]
/// the receiver. The pipeline holds no sender, so it ends (after its
/// uploads in flight) once the shards are gone.
pub fn sealed_queue() -> (SealedTx, tokio::sync::mpsc::Receiver<Sealed>) {
    tokio::sync::mpsc::channel(SEALED_QUEUE_MAX)
}
