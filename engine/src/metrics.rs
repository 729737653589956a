//! Per-shard metrics: plain atomics owned by one shard (no cross-core
//! contention on the hot path), summed when `/metrics` is scraped.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (ms) of the produce latency histogram buckets.
pub const PRODUCE_LATENCY_BUCKETS_MS: [u64; 12] =
    [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

#[derive(Default)]
pub struct ShardMetrics {
    /// Produce requests by how long they took from admission to answer.
    produce_latency: [AtomicU64; PRODUCE_LATENCY_BUCKETS_MS.len() + 1],
    produce_latency_us_sum: AtomicU64,
    pub produce_batches: AtomicU64,
    pub produce_bytes: AtomicU64,
    pub produce_batches_rejected: AtomicU64,
    pub fetch_bytes: AtomicU64,
}

impl ShardMetrics {
    pub fn observe_produce(&self, elapsed: std::time::Duration) {
        let ms = elapsed.as_millis() as u64;
        let i = PRODUCE_LATENCY_BUCKETS_MS
            .iter()
            .position(|&b| ms < b)
            .unwrap_or(PRODUCE_LATENCY_BUCKETS_MS.len());
        self.produce_latency[i].fetch_add(1, Ordering::Relaxed);
        self.produce_latency_us_sum
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Prometheus text for all shards.
pub fn render(out: &mut String, shards: &[std::sync::Arc<ShardMetrics>]) {
    let r = Ordering::Relaxed;
    let sum = |f: &dyn Fn(&ShardMetrics) -> u64| shards.iter().map(|s| f(s)).sum::<u64>();
    let name = "rutomq_produce_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Produce requests, admission to answer (durable)."
    );
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, b) in PRODUCE_LATENCY_BUCKETS_MS.iter().enumerate() {
        cumulative += sum(&|s| s.produce_latency[i].load(r));
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"{}\"}} {cumulative}",
            *b as f64 / 1000.0
        );
    }
    cumulative += sum(&|s| s.produce_latency[PRODUCE_LATENCY_BUCKETS_MS.len()].load(r));
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(
        out,
        "{name}_sum {}",
        sum(&|s| s.produce_latency_us_sum.load(r)) as f64 / 1e6
    );
    let _ = writeln!(out, "{name}_count {cumulative}");
    for (metric, help, f) in [
        (
            "rutomq_produce_batches_total",
            "Record batches appended.",
            &(|s: &ShardMetrics| s.produce_batches.load(r)) as &dyn Fn(&ShardMetrics) -> u64,
        ),
        (
            "rutomq_produce_bytes_total",
            "Record batch bytes appended.",
            &|s: &ShardMetrics| s.produce_bytes.load(r),
        ),
        (
            "rutomq_produce_batches_rejected_total",
            "Record batches rejected by validation.",
            &|s: &ShardMetrics| s.produce_batches_rejected.load(r),
        ),
        (
            "rutomq_fetch_bytes_total",
            "Record bytes returned by Fetch.",
            &|s: &ShardMetrics| s.fetch_bytes.load(r),
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {metric} {help}\n# TYPE {metric} counter\n{metric} {}",
            sum(f)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn histogram_is_cumulative() {
        let m = std::sync::Arc::new(ShardMetrics::default());
        m.observe_produce(Duration::from_micros(500));
        m.observe_produce(Duration::from_millis(30));
        m.observe_produce(Duration::from_secs(9));
        let mut out = String::new();
        render(&mut out, &[m]);
        assert!(
            out.contains("rutomq_produce_latency_seconds_bucket{le=\"0.001\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("rutomq_produce_latency_seconds_bucket{le=\"0.05\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("rutomq_produce_latency_seconds_bucket{le=\"+Inf\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("rutomq_produce_latency_seconds_count 3\n"),
            "{out}"
        );
    }
}
