//! The sensors quotas are enforced by, one per quota kind and quota entity
//! (user tag, client-id tag), shared by every connection of that entity on
//! every shard of the agent (as Kafka's are per broker).
//!
//! A sensor lives while connections hold it and for a whole quota window
//! after its last record: a client that reconnects keeps its rate (it
//! cannot shed a throttle by reconnecting), and a sensor idle for longer
//! than the window has measured nothing anyway. At most
//! [`QUOTA_SENSORS_MAX`] are registered; past that (after dropping the
//! idle ones) a new entity's sensor is its connection's own, and that is
//! logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::rate::{Rate, TokenBucket, WINDOW_MS};
use super::Kind;
use crate::limits::{QUOTA_IP_TRACKED_MAX, QUOTA_SENSORS_MAX};

/// Milliseconds on the monotonic clock the sensors share.
pub fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// What a sensor measures: a windowed rate (bytes, request time), or a
/// token bucket (controller mutations).
#[derive(Debug)]
enum Stat {
    Rate(Rate),
    Bucket(TokenBucket),
}

impl Stat {
    fn record(&mut self, value: f64, bound: f64, now: u64) {
        match self {
            Stat::Rate(r) => r.record(value, now),
            Stat::Bucket(b) => b.record(value, bound, now),
        }
    }

    fn throttle_ms(&mut self, bound: f64, now: u64, max_ms: u64) -> u64 {
        match self {
            Stat::Rate(r) => r.throttle_ms(bound, now, max_ms),
            Stat::Bucket(b) => b.throttle_ms(bound, now, max_ms),
        }
    }
}

/// One quota entity's measure of one kind.
#[derive(Debug)]
pub struct Sensor {
    stat: Mutex<Stat>,
    last_ms: AtomicU64,
}

impl Sensor {
    fn new(kind: Kind, now: u64) -> Sensor {
        let stat = match kind {
            Kind::Mutation => Stat::Bucket(TokenBucket::default()),
            _ => Stat::Rate(Rate::default()),
        };
        Sensor {
            stat: Mutex::new(stat),
            last_ms: AtomicU64::new(now),
        }
    }

    /// The measure, locked, and the time now.
    fn stat(&self) -> (std::sync::MutexGuard<'_, Stat>, u64) {
        let now = now_ms();
        self.last_ms.store(now, Ordering::Relaxed);
        (self.stat.lock().unwrap_or_else(|e| e.into_inner()), now)
    }

    /// Records `value` now and answers the throttle time it earns against
    /// `bound` (0 within it), at most `max_ms`.
    pub fn record(&self, value: f64, bound: f64, max_ms: u64) -> u64 {
        let (mut stat, now) = self.stat();
        stat.record(value, bound, now);
        stat.throttle_ms(bound, now, max_ms)
    }

    /// Kafka's strict recording (controller mutations of new clients):
    /// refused with the throttle time when the quota is already exceeded,
    /// else recorded whatever it takes.
    pub fn record_strict(&self, value: f64, bound: f64, max_ms: u64) -> Result<(), u64> {
        let (mut stat, now) = self.stat();
        match stat.throttle_ms(bound, now, max_ms) {
            0 => {
                stat.record(value, bound, now);
                Ok(())
            }
            owed => Err(owed),
        }
    }

    /// Takes `value` back (a throttled Fetch's bytes).
    pub fn unrecord(&self, value: f64, bound: f64) {
        let (mut stat, now) = self.stat();
        stat.record(-value, bound, now);
    }

    /// The throttle time the measure so far earns, recording nothing.
    pub fn throttle_ms(&self, bound: f64, max_ms: u64) -> u64 {
        let (mut stat, now) = self.stat();
        stat.throttle_ms(bound, now, max_ms)
    }
}

type SensorKey = (Kind, String, String);

/// The agent's sensors, and its per-IP connection rates.
#[derive(Default)]
pub struct Sensors {
    by_entity: Mutex<HashMap<SensorKey, Arc<Sensor>>>,
    by_ip: Mutex<HashMap<std::net::IpAddr, Rate>>,
    overflowed: AtomicU64,
}

impl Sensors {
    /// The sensor of `kind` for the entity `(user_tag, client_tag)`.
    pub fn get(&self, kind: Kind, user_tag: &str, client_tag: &str) -> Arc<Sensor> {
        let now = now_ms();
        let mut map = self.by_entity.lock().unwrap_or_else(|e| e.into_inner());
        let key = (kind, user_tag.to_owned(), client_tag.to_owned());
        if let Some(s) = map.get(&key) {
            return s.clone();
        }
        if map.len() >= QUOTA_SENSORS_MAX {
            map.retain(|_, s| {
                Arc::strong_count(s) > 1
                    || now.saturating_sub(s.last_ms.load(Ordering::Relaxed)) < WINDOW_MS
            });
        }
        let sensor = Arc::new(Sensor::new(kind, now));
        if map.len() < QUOTA_SENSORS_MAX {
            map.insert(key, sensor.clone());
        } else if self
            .overflowed
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(10_000)
        {
            tracing::warn!(
                limit = QUOTA_SENSORS_MAX,
                "more quota entities active than sensors kept; a new connection's quota is its own"
            );
        }
        sensor
    }

    /// Sensors registered now (for `/metrics`).
    pub fn registered(&self) -> usize {
        self.by_entity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Registers a new connection from `ip` against its connection
    /// creation rate `bound` (per second): the throttle time it earns, 0
    /// when within it.
    pub fn connection_from(&self, ip: std::net::IpAddr, bound: f64, max_ms: u64) -> u64 {
        let now = now_ms();
        let mut map = self.by_ip.lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(&ip) && map.len() >= QUOTA_IP_TRACKED_MAX {
            map.retain(|_, r| r.per_second(now) > 0.0);
            if map.len() >= QUOTA_IP_TRACKED_MAX {
                // Every tracked IP is active: the oldest-looking one makes
                // room (the bound stays enforced for the busy ones).
                if let Some(k) = map.keys().next().copied() {
                    map.remove(&k);
                }
            }
        }
        let r = map.entry(ip).or_default();
        r.record(1.0, now);
        let ms = r.throttle_ms(bound, now, max_ms);
        if ms > 0 {
            // A refused connection does not count (Kafka's way).
            r.record(-1.0, now);
        }
        ms
    }
}

/// A connection's quotas: for each kind the sensor and bound in force, as
/// resolved for the quota set of `version` and the client id `client_id`.
#[derive(Clone, Debug)]
pub struct ClientQuota {
    pub version: u64,
    pub client_id: String,
    pub applied: [Option<(Arc<Sensor>, f64)>; Kind::ALL.len()],
    /// Where its throttles are counted.
    pub stats: Arc<super::QuotaStats>,
}

impl ClientQuota {
    pub fn of(&self, kind: Kind) -> Option<&(Arc<Sensor>, f64)> {
        self.applied[kind.index()].as_ref()
    }

    pub fn is_empty(&self) -> bool {
        self.applied.iter().all(Option::is_none)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sensor_per_entity_shared() {
        let s = Sensors::default();
        let a = s.get(Kind::Produce, "alice", "");
        let b = s.get(Kind::Produce, "alice", "");
        assert!(Arc::ptr_eq(&a, &b));
        let c = s.get(Kind::Fetch, "alice", "");
        assert!(!Arc::ptr_eq(&a, &c));
        a.record(1_000_000.0, 1.0, 500);
        assert_eq!(b.throttle_ms(1.0, 500), 500);
    }

    #[test]
    fn connection_rates_are_per_ip() {
        let s = Sensors::default();
        let ip = |x| std::net::IpAddr::from([10, 0, 0, x]);
        // 10 connections at once over a 10 s minimum window: 1/s.
        let mut last = 0;
        for _ in 0..10 {
            last = s.connection_from(ip(1), 1.0, 5_000);
        }
        assert_eq!(last, 0);
        assert!(s.connection_from(ip(1), 1.0, 5_000) > 0);
        assert_eq!(s.connection_from(ip(2), 1.0, 5_000), 0);
    }
}
