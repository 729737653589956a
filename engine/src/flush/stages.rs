//! Where a flush window's time goes, for `/metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::metrics::StageHistogram;

/// Where a window's time goes, summed over windows (for `/metrics`):
/// sealed → taken by the pipeline → gathered → uploaded → committed.
#[derive(Default, Debug)]
pub struct WindowStages {
    pub windows: AtomicU64,
    /// Shard buffers sealed at once because the pipeline was idle
    /// (`--flush-when-idle`), not at their window's end.
    pub idle_seals: AtomicU64,
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
    pub(super) fn add(counter: &AtomicU64, histogram: &StageHistogram, took: Duration) {
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
            h.render(out, name, ("stage", stage));
        }
    }
}
