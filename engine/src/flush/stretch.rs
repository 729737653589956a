//! Adaptive flush: at low traffic a window stretches over several grid
//! intervals, so that a trickle of records does not cost one object (one
//! PUT, one PostgreSQL transaction) per interval; at high traffic it is one
//! interval again.
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

use crate::limits::{STRETCH_WINDOW_BYTES, WINDOW_SLOTS};

/// The agent's current window stride, in grid intervals.
pub struct Stretch {
    stride: AtomicU64,
    stride_max: u64,
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
            seen: std::sync::Mutex::new((0, 0)),
        }
    }

    pub fn stride(&self) -> u64 {
        self.stride.load(Ordering::Relaxed)
    }

    pub fn stride_max(&self) -> u64 {
        self.stride_max
    }

    /// A window was gathered: `bytes` in all, ending at grid window `window`
    /// (None: a buffer sealed early, full, which ends no grid window).
    pub fn observe(&self, window: Option<u64>, bytes: usize) {
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
        s.observe(Some(w), 1024);
        assert_eq!(s.stride(), 2, "doubles at most per window");
        w += 2;
        s.observe(Some(w), 2048);
        assert_eq!(s.stride(), 4);
        w += 4;
        s.observe(Some(w), 4096);
        assert_eq!(s.stride(), 4, "never past the ceiling");
        // Full buffers sealed early, then the window: heavy traffic.
        s.observe(None, STRETCH_WINDOW_BYTES as usize * 8);
        w += 4;
        s.observe(Some(w), 1024);
        assert_eq!(s.stride(), 1, "shrinks at once");
    }

    #[test]
    fn stride_one_is_off_and_the_ceiling_fits_the_membership_ring() {
        let off = Stretch::new(1);
        off.observe(Some(5), 1);
        off.observe(Some(9), 1);
        assert_eq!(off.stride(), 1);
        assert!(Stretch::new(10_000).stride_max() <= WINDOW_SLOTS as u64 / 4);
    }
}
