//! The wake-ups of a coordinator's keys, earliest first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::limits::{TIMERS_STALE_PER_KEY_MAX, TIMERS_STALE_SLACK_MAX};

/// A min-heap of (wake-up time, key). A key re-armed earlier leaves its
/// later entry behind; whoever pops an entry checks it is still the key's
/// current wake-up ([`crate::coordinator::Slots`] does).
#[derive(Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(Instant, String)>>,
}

impl Timers {
    pub fn new() -> Timers {
        Timers::default()
    }

    pub fn push(&mut self, at: Instant, key: String) {
        self.heap.push(Reverse((at, key)));
    }

    /// The earliest wake-up.
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// The earliest entry if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, String)> {
        if self.next()? > now {
            return None;
        }
        self.heap.pop().map(|Reverse(entry)| entry)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Drops the entries `current` says are stale, once there are more
    /// than the limits allow for `keys` loaded keys.
    pub fn prune(&mut self, keys: usize, current: impl Fn(&Instant, &str) -> bool) {
        if self.heap.len() > TIMERS_STALE_PER_KEY_MAX * keys + TIMERS_STALE_SLACK_MAX {
            self.heap.retain(|Reverse((t, key))| current(t, key));
        }
    }
}
