//! The wall clock in Kafka's unit: milliseconds since the Unix epoch (0 if
//! the clock is before it). Durations and timeouts use `Instant`; this is
//! for timestamps that leave the process (record times, state-since times).

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
