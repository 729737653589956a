//! Adaptive flush, both ways a window's cost can dominate.
//!
//! Time: at low traffic a window stretches over several grid intervals, so
//! that a trickle of records does not cost one object (one PUT, one
//! PostgreSQL transaction) per interval; at high traffic it is one interval
//! again.
//!
//! Size: when PostgreSQL is the bottleneck (windows wait to commit), each
//! committed span should carry more bytes. A span is one partition's
//! batches in one object, so with many partitions a `flush_bytes` buffer
//! holds little of each and the commits cap throughput at PostgreSQL's
//! spans per second (benches/results/2026-12-06-scaling.md). While at least
//! [`COMMITS_WAITING_GROW`] windows wait for their commit and windows carry
//! at least [`SPANS_PER_WINDOW_GROW`] partitions, the size a shard buffer is
//! sealed at doubles (up to [`FLUSH_BYTES_SCALE_MAX`] × `flush_bytes`); at
//! [`COMMITS_WAITING_SHRINK`] or fewer waiting, or half as many partitions,
//! it halves back. With few partitions per window PostgreSQL's work does not
//! grow with the spans, and bigger objects would only cost the readers
//! (fewer kept read buffers, fewer reads in parallel).
//! Only buffers that fill before their window ends are affected: below
//! saturation the grid seals them, as before. Memory stays bounded by the
//! shards' admission budget, which every buffered byte is charged to.
//!
//! The pipeline measures the agent's traffic per grid interval from the
//! windows it gathers (bytes since the previous window over the intervals
//! since it) and sets the stride: how many intervals the next windows span.
//! A stride that would leave a window under [`STRETCH_WINDOW_BYTES`] grows
//! (doubling at most per window, up to the configured ceiling); one that
//! fills it shrinks at once. Shards arm their buffers for the next grid
//! window whose index is a multiple of the stride, so buffers armed within
//! the same stretched window still meet in one object.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::limits::{
    COMMITS_WAITING_GROW, COMMITS_WAITING_SHRINK, FLUSH_BYTES_SCALE_MAX, SPANS_PER_WINDOW_GROW,
    STRETCH_WINDOW_BYTES, WINDOW_SLOTS,
};

/// The agent's current window stride (in grid intervals) and buffer size
/// scale.
pub struct Stretch {
    stride: AtomicU64,
    stride_max: u64,
    /// Windows submitted for commit and not answered yet.
    commits_waiting: AtomicU64,
    /// Shard buffers are sealed at this many × `flush_bytes`.
    bytes_scale: AtomicU64,
    /// Traffic since the last grid window the pipeline gathered: its index
    /// and the bytes gathered since (early-sealed buffers included).
    seen: std::sync::Mutex<(u64, u64)>,
}

impl Stretch {
    /// `stride_max` 1 turns adaptation off.
    pub fn new(stride_max: u64) -> Stretch {
        Stretch {
            stride: AtomicU64::new(1),
            // The membership ring must hold every window armed at once.
            stride_max: stride_max.clamp(1, WINDOW_SLOTS as u64 / 4),
            commits_waiting: AtomicU64::new(0),
            bytes_scale: AtomicU64::new(1),
            seen: std::sync::Mutex::new((0, 0)),
        }
    }

    /// The size a shard buffer is sealed at now.
    pub fn seal_bytes(&self, flush_bytes: usize) -> usize {
        flush_bytes.saturating_mul(self.bytes_scale.load(Ordering::Relaxed) as usize)
    }

    pub fn bytes_scale(&self) -> u64 {
        self.bytes_scale.load(Ordering::Relaxed)
    }

    /// A window was submitted for commit.
    pub fn commit_submitted(&self) {
        self.commits_waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// ... and answered (committed or not).
    pub fn commit_answered(&self) {
        self.commits_waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// Grows or shrinks the buffer size by the commit backlog and the
    /// partitions of the window just gathered (its spans, about).
    fn scale_bytes(&self, parts: usize) {
        let waiting = self.commits_waiting.load(Ordering::Relaxed);
        let now = self.bytes_scale();
        let next = if waiting >= COMMITS_WAITING_GROW && parts >= SPANS_PER_WINDOW_GROW {
            (now * 2).min(FLUSH_BYTES_SCALE_MAX)
        } else if waiting <= COMMITS_WAITING_SHRINK || parts < SPANS_PER_WINDOW_GROW / 2 {
            (now / 2).max(1)
        } else {
            now
        };
        if next != now {
            self.bytes_scale.store(next, Ordering::Relaxed);
            tracing::debug!(scale = next, waiting, "flush buffer size");
        }
    }

    pub fn stride(&self) -> u64 {
        self.stride.load(Ordering::Relaxed)
    }

    pub fn stride_max(&self) -> u64 {
        self.stride_max
    }

    /// A window was gathered: `bytes` in all, `parts` partitions' batches
    /// (summed over its shard buffers), ending at grid window `window`
    /// (None: a buffer sealed early, full, which ends no grid window).
    pub fn observe(&self, window: Option<u64>, bytes: usize, parts: usize) {
        self.scale_bytes(parts);
        if self.stride_max == 1 {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.1 += bytes as u64;
        let Some(window) = window else { return };
        let (last, total) = std::mem::replace(&mut *seen, (window, 0));
        drop(seen);
        // Intervals this traffic arrived in; a first window or one after a
        // long idle time counts as the longest stride.
        let intervals = match window.checked_sub(last) {
            Some(n) if last > 0 && n > 0 => n.min(self.stride_max * 2),
            _ => self.stride_max * 2,
        };
        let per_interval = total / intervals;
        let wanted = if per_interval == 0 {
            self.stride_max
        } else {
            STRETCH_WINDOW_BYTES
                .div_ceil(per_interval)
                .min(self.stride_max)
        };
        let now = self.stride();
        let next = if wanted > now {
            wanted.min(now * 2)
        } else {
            wanted.max(1)
        };
        if next != now {
            self.stride.store(next, Ordering::Relaxed);
            tracing::debug!(stride = next, per_interval, "flush window stride");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trickle_stretches_windows_and_traffic_shrinks_them_at_once() {
        let s = Stretch::new(4);
        assert_eq!(s.stride(), 1);
        // 1 KiB per interval: far below the window size wanted.
        let mut w = 10;
        s.observe(Some(w), 1024, 1);
        assert_eq!(s.stride(), 2, "doubles at most per window");
        w += 2;
        s.observe(Some(w), 2048, 1);
        assert_eq!(s.stride(), 4);
        w += 4;
        s.observe(Some(w), 4096, 1);
        assert_eq!(s.stride(), 4, "never past the ceiling");
        // Full buffers sealed early, then the window: heavy traffic.
        s.observe(None, STRETCH_WINDOW_BYTES as usize * 8, 1);
        w += 4;
        s.observe(Some(w), 1024, 1);
        assert_eq!(s.stride(), 1, "shrinks at once");
    }

    #[test]
    fn buffers_grow_while_commits_wait_and_shrink_back() {
        let s = Stretch::new(1);
        let base = 4 << 20;
        assert_eq!(s.seal_bytes(base), base);
        for _ in 0..COMMITS_WAITING_GROW {
            s.commit_submitted();
        }
        // Few partitions per window: PostgreSQL's work is not in the spans.
        s.observe(None, base, 8);
        assert_eq!(s.bytes_scale(), 1);
        for scale in [2, 4, 8, 8] {
            s.observe(None, base, SPANS_PER_WINDOW_GROW);
            assert_eq!(s.bytes_scale(), scale.min(FLUSH_BYTES_SCALE_MAX));
        }
        assert_eq!(s.seal_bytes(base), base * FLUSH_BYTES_SCALE_MAX as usize);
        // Between the marks: kept.
        for _ in COMMITS_WAITING_SHRINK..COMMITS_WAITING_GROW - 1 {
            s.commit_answered();
        }
        s.observe(None, base, SPANS_PER_WINDOW_GROW);
        assert_eq!(s.bytes_scale(), FLUSH_BYTES_SCALE_MAX);
        // Caught up: halves per window, back to flush_bytes.
        for _ in 0..COMMITS_WAITING_SHRINK {
            s.commit_answered();
        }
        for _ in 0..8 {
            s.observe(None, base, SPANS_PER_WINDOW_GROW);
        }
        assert_eq!(s.seal_bytes(base), base);
    }

    #[test]
    fn stride_one_is_off_and_the_ceiling_fits_the_membership_ring() {
        let off = Stretch::new(1);
        off.observe(Some(5), 1, 1);
        off.observe(Some(9), 1, 1);
        assert_eq!(off.stride(), 1);
        assert!(Stretch::new(10_000).stride_max() <= WINDOW_SLOTS as u64 / 4);
    }
}
