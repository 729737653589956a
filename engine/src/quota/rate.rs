//! A rate over a sliding window of samples, measured and turned into a
//! throttle time the way Kafka's quota sensors do (its `Rate` over a
//! `SampledStat`, and `QuotaUtils.throttleTime`), so a client sees the same
//! throttle times from rutomq as from Kafka for the same traffic.
//!
//! The window is [`QUOTA_WINDOW_SAMPLES`] samples of
//! [`QUOTA_SAMPLE_WINDOW_MS`] each (Kafka's `quota.window.num` = 11 and
//! `quota.window.size.seconds` = 1). A sample older than the whole window
//! is reset before a measurement; while fewer than `samples - 1` full
//! sample windows have passed since the oldest sample started, the
//! elapsed time counts as that many (a new client's first bytes are not
//! divided by a tiny elapsed time).

use crate::limits::{QUOTA_SAMPLE_WINDOW_MS, QUOTA_WINDOW_SAMPLES};

#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    value: f64,
    started_ms: u64,
}

/// How long a sample counts: the whole window (Kafka's `quota.window.num`
/// x `quota.window.size.seconds`).
pub const WINDOW_MS: u64 = QUOTA_WINDOW_SAMPLES as u64 * QUOTA_SAMPLE_WINDOW_MS;

/// One quota sensor's samples. It starts with none: its first sample
/// starts with its first record (as Kafka's), so the time a sensor waited
/// unused does not count.
#[derive(Clone, Debug, Default)]
pub struct Rate {
    samples: [Sample; QUOTA_WINDOW_SAMPLES],
    /// Samples in use (they are added as time passes, up to the window).
    used: usize,
    current: usize,
}

impl Rate {
    /// Adds `value` at `now_ms` (a later sample when the current one's
    /// window has passed); a negative value takes it back.
    pub fn record(&mut self, value: f64, now_ms: u64) {
        if self.used == 0 {
            self.used = 1;
            self.samples[0] = Sample {
                value: 0.0,
                started_ms: now_ms,
            };
        }
        let cur = self.samples[self.current];
        if now_ms.saturating_sub(cur.started_ms) >= QUOTA_SAMPLE_WINDOW_MS {
            self.current = (self.current + 1) % QUOTA_WINDOW_SAMPLES;
            if self.current >= self.used {
                self.used += 1;
            }
            self.samples[self.current] = Sample {
                value: 0.0,
                started_ms: now_ms,
            };
        }
        self.samples[self.current].value += value;
    }

    fn purge(&mut self, now_ms: u64) {
        for s in &mut self.samples[..self.used] {
            if now_ms.saturating_sub(s.started_ms) >= WINDOW_MS {
                *s = Sample {
                    value: 0.0,
                    started_ms: now_ms,
                };
            }
        }
    }

    /// The total over the window and the window it is measured over, in
    /// milliseconds.
    fn measure(&mut self, now_ms: u64) -> (f64, u64) {
        self.purge(now_ms);
        let live = &self.samples[..self.used];
        let oldest = live.iter().map(|s| s.started_ms).min().unwrap_or(now_ms);
        let mut elapsed_ms = now_ms.saturating_sub(oldest);
        let full = elapsed_ms / QUOTA_SAMPLE_WINDOW_MS;
        let min_full = QUOTA_WINDOW_SAMPLES as u64 - 1;
        if full < min_full {
            elapsed_ms += (min_full - full) * QUOTA_SAMPLE_WINDOW_MS;
        }
        (live.iter().map(|s| s.value).sum(), elapsed_ms.max(1))
    }

    /// Units per second now.
    pub fn per_second(&mut self, now_ms: u64) -> f64 {
        let (total, window_ms) = self.measure(now_ms);
        total / (window_ms as f64 / 1000.0)
    }

    /// How long a client over `bound` (units per second) waits so that its
    /// rate comes back to it: Kafka's `(rate - bound) / bound × window`,
    /// at most `max_ms`; 0 within the bound.
    pub fn throttle_ms(&mut self, bound: f64, now_ms: u64, max_ms: u64) -> u64 {
        let (total, window_ms) = self.measure(now_ms);
        let rate = total / (window_ms as f64 / 1000.0);
        if rate <= bound {
            return 0;
        }
        if bound <= 0.0 {
            return max_ms;
        }
        let ms = ((rate - bound) / bound * window_ms as f64).round();
        (ms.max(0.0) as u64).min(max_ms)
    }
}

/// Kafka's `TokenBucket` (KIP-599), what the controller mutation quota is
/// measured by: credit for the window's worth of mutations (`samples`
/// sample windows at the quota), refilled at the quota;
/// a mutation takes its permits, and a client owing permits waits for
/// them.
#[derive(Clone, Debug, Default)]
pub struct TokenBucket {
    tokens: f64,
    /// `None` until first used (then the bucket starts full).
    last_ms: Option<u64>,
}

impl TokenBucket {
    fn burst(bound: f64) -> f64 {
        QUOTA_WINDOW_SAMPLES as f64 * QUOTA_SAMPLE_WINDOW_MS as f64 / 1000.0 * bound
    }

    fn refill(&mut self, bound: f64, now_ms: u64) {
        let burst = Self::burst(bound);
        self.tokens = match self.last_ms {
            None => burst,
            Some(last) => {
                let refilled = bound * now_ms.saturating_sub(last) as f64 / 1000.0;
                (self.tokens + refilled).min(burst)
            }
        };
        self.last_ms = Some(now_ms);
    }

    /// Takes `permits` at `now_ms` (the balance may go below zero).
    pub fn record(&mut self, permits: f64, bound: f64, now_ms: u64) {
        self.refill(bound, now_ms);
        self.tokens = (self.tokens - permits).min(Self::burst(bound));
    }

    /// How long a client owing permits waits for them: Kafka's
    /// `-tokens / quota` seconds, at most `max_ms`; 0 when it owes none.
    pub fn throttle_ms(&mut self, bound: f64, now_ms: u64, max_ms: u64) -> u64 {
        self.refill(bound, now_ms);
        if self.tokens >= 0.0 {
            return 0;
        }
        if bound <= 0.0 {
            return max_ms;
        }
        ((-self.tokens / bound * 1000.0).round() as u64).min(max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_sensor_divides_by_the_minimum_window() {
        let mut r = Rate::default();
        r.record(10_000.0, 1_000);
        // 10 full windows of 1 s assumed: 1000/s.
        assert_eq!(r.per_second(1_000), 1_000.0);
        // A quota of 500/s: (1000 - 500) / 500 × 10 s = 10 s.
        assert_eq!(r.throttle_ms(500.0, 1_000, u64::MAX), 10_000);
        assert_eq!(r.throttle_ms(500.0, 1_000, 3_000), 3_000);
        assert_eq!(r.throttle_ms(1_000.0, 1_000, u64::MAX), 0);
    }

    #[test]
    fn old_samples_expire_and_samples_rotate() {
        let mut r = Rate::default();
        for s in 0..30u64 {
            r.record(100.0, s * 1_000);
        }
        // At most 11 samples of 100 over an 11-ish second window.
        let rate = r.per_second(29_500);
        assert!((rate - 100.0).abs() < 15.0, "{rate}");
        // Long idle: everything expired.
        assert_eq!(r.per_second(100_000), 0.0);
    }

    #[test]
    fn the_window_starts_with_the_first_record() {
        let mut r = Rate::default();
        assert_eq!(r.per_second(3_000), 0.0);
        r.record(10_000.0, 5_000);
        assert_eq!(r.throttle_ms(500.0, 5_000, u64::MAX), 10_000);
    }

    #[test]
    fn a_token_bucket_lends_the_window_then_refills_at_the_quota() {
        let mut b = TokenBucket::default();
        // 10 permits/s: 110 of credit.
        b.record(90.0, 10.0, 0);
        assert_eq!(b.throttle_ms(10.0, 0, u64::MAX), 0);
        b.record(90.0, 10.0, 0);
        // 70 owed at 10/s: 7 s.
        assert_eq!(b.throttle_ms(10.0, 0, u64::MAX), 7_000);
        assert_eq!(b.throttle_ms(10.0, 3_000, u64::MAX), 4_000);
        assert_eq!(b.throttle_ms(10.0, 7_000, u64::MAX), 0);
        // Never more credit than the window's.
        assert_eq!(b.throttle_ms(10.0, 1_000_000, u64::MAX), 0);
        b.record(111.0, 10.0, 1_000_000);
        assert_eq!(b.throttle_ms(10.0, 1_000_000, u64::MAX), 100);
    }

    #[test]
    fn unrecord_takes_back() {
        let mut r = Rate::default();
        r.record(5_000.0, 0);
        r.record(-5_000.0, 0);
        assert_eq!(r.per_second(0), 0.0);
    }
}
