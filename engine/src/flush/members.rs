//! Window membership: how many shards will seal a buffer for each grid
//! window, so that the pipeline stops gathering a window as soon as all of
//! them arrived.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::limits::WINDOW_SLOTS;

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
    pub(super) fn expected(&self, window: u64) -> u64 {
        self.slot(window).load(Ordering::Relaxed)
    }
    pub(super) fn gathered(&self, window: u64, n: u64) {
        self.slot(window).fetch_sub(n, Ordering::Relaxed);
    }
}
