//! The agent's window clock: one grid of flush windows, shared by every
//! shard, so that the buffers of one window reach the pipeline together.

use std::time::{Duration, Instant};

/// Window `i` spans the `i`th flush interval after the clock's epoch,
/// counting from 1.
pub struct WindowClock {
    epoch: Instant,
    interval: Duration,
}

impl WindowClock {
    pub fn new(interval: Duration) -> WindowClock {
        WindowClock {
            epoch: Instant::now(),
            interval,
        }
    }

    /// When grid window `window` ends.
    pub fn window_end(&self, window: u64) -> Instant {
        let nanos = self.interval.as_nanos().max(1) as u64;
        self.epoch + Duration::from_nanos(window.saturating_mul(nanos))
    }

    /// The next window boundary whose index is a multiple of `stride` (see
    /// [`super::stretch`]): how long until it, and that window's index.
    pub fn until_next_window(&self, stride: u64) -> (Duration, u64) {
        let now = Instant::now();
        let interval = self.interval.as_nanos().max(1);
        let next = (now.duration_since(self.epoch).as_nanos() / interval + 1) as u64;
        let stride = stride.max(1);
        let index = next.div_ceil(stride) * stride;
        (self.window_end(index).saturating_duration_since(now), index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_window_ends_within_one_interval_on_the_grid() {
        let clock = WindowClock::new(Duration::from_millis(2));
        let (wait, index) = clock.until_next_window(1);
        assert!(index >= 1);
        assert!(wait <= Duration::from_millis(2));
        assert_eq!(
            clock.window_end(index + 1) - clock.window_end(index),
            Duration::from_millis(2)
        );
    }

    #[test]
    fn a_stretched_window_ends_on_a_multiple_of_its_stride() {
        let clock = WindowClock::new(Duration::from_millis(2));
        let (wait, index) = clock.until_next_window(4);
        assert_eq!(index % 4, 0);
        assert!(wait <= Duration::from_millis(8));
    }
}
