//! Per-shard metrics: plain atomics owned by one shard (no cross-core
//! contention on the hot path), summed when `/metrics` is scraped.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (ms) of the produce latency histogram buckets.
pub const PRODUCE_LATENCY_BUCKETS_MS: [u64; 17] = [
    1, 2, 3, 5, 7, 10, 12, 15, 17, 20, 30, 50, 100, 200, 500, 1000, 5000,
];

#[derive(Default)]
pub struct ShardMetrics {
    /// Produce requests by how long they took from admission to answer.
    produce_latency: [AtomicU64; PRODUCE_LATENCY_BUCKETS_MS.len() + 1],
    produce_latency_us_sum: AtomicU64,
    /// Every answered request, by API key.
    pub request_times: RequestTimes,
    pub produce_batches: AtomicU64,
    pub produce_bytes: AtomicU64,
    pub produce_batches_rejected: AtomicU64,
    pub fetch_bytes: AtomicU64,
    /// PostgreSQL reads of a partition's spans that a fetch waited for, and
    /// those read ahead of a consumer (see `Reader::read_spans_ahead`).
    pub span_reads_waited: AtomicU64,
    pub span_reads_ahead: AtomicU64,
    /// Partitions a Fetch answered without records rather than wait for
    /// their object-store reads (see `read::Enough`).
    pub fetch_reads_unwaited: AtomicU64,
    pub sasl_authentications: AtomicU64,
    /// Sessions renewed by re-authentication (KIP-368).
    pub sasl_reauthentications: AtomicU64,
    /// Connections closed for a request after their session expired.
    pub sasl_sessions_expired: AtomicU64,
    pub sasl_authentication_failures: AtomicU64,
    /// Connections closed for a request other than ApiVersions and the
    /// SASL ones before authenticating.
    pub requests_before_authentication: AtomicU64,
    /// Operations the authorizer refused (one per resource refused).
    pub authorization_denials: AtomicU64,
    /// Records share fetches handed out (KIP-932), and how many of them
    /// had been delivered before.
    pub share_records_acquired: AtomicU64,
    pub share_records_redelivered: AtomicU64,
    /// Share-partitions whose acknowledgements were refused.
    pub share_acknowledgements_refused: AtomicU64,
    /// Streams groups' internal topics created for them (KIP-1071), and
    /// those that could not be (refused, invalid, or not permitted).
    pub streams_internal_topics_created: AtomicU64,
    pub streams_internal_topics_refused: AtomicU64,
}

impl ShardMetrics {
    pub fn observe_produce(&self, elapsed: std::time::Duration) {
        let us = elapsed.as_micros() as u64;
        let i = PRODUCE_LATENCY_BUCKETS_MS
            .iter()
            .position(|&b| us <= b * 1000)
            .unwrap_or(PRODUCE_LATENCY_BUCKETS_MS.len());
        self.produce_latency[i].fetch_add(1, Ordering::Relaxed);
        self.produce_latency_us_sum
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Upper bounds (µs) of the window stage histogram buckets: fine around
/// the few milliseconds a stage takes, coarse in the tail.
pub const STAGE_BUCKETS_US: [u64; 16] = [
    250, 500, 1_000, 1_500, 2_000, 3_000, 4_000, 5_000, 6_000, 8_000, 10_000, 15_000, 20_000,
    50_000, 100_000, 500_000,
];

/// A histogram of one window stage (fixed buckets, atomics; written by the
/// storage thread, read by `/metrics`).
#[derive(Default, Debug)]
pub struct StageHistogram {
    buckets: [AtomicU64; STAGE_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
}

impl StageHistogram {
    pub fn observe(&self, elapsed: std::time::Duration) {
        let us = elapsed.as_micros() as u64;
        let i = STAGE_BUCKETS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(STAGE_BUCKETS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Its counts now, to render or to add to another's.
    pub fn snapshot(&self) -> StageCounts {
        StageCounts {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }

    /// Prometheus lines of this histogram as series `name{label="value"}`.
    pub fn render(&self, out: &mut String, name: &str, label: (&str, &str)) {
        self.snapshot().render(out, name, label);
    }
}

/// The counts of a [`StageHistogram`] (or of several, added).
#[derive(Default, Clone, Copy, Debug)]
pub struct StageCounts {
    buckets: [u64; STAGE_BUCKETS_US.len() + 1],
    sum_us: u64,
}

impl StageCounts {
    pub fn add(&mut self, other: &StageCounts) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.sum_us += other.sum_us;
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Prometheus lines as series `name{label="value"}`.
    pub fn render(&self, out: &mut String, name: &str, (label, value): (&str, &str)) {
        let mut cumulative = 0;
        for (i, b) in STAGE_BUCKETS_US.iter().enumerate() {
            cumulative += self.buckets[i];
            let _ = writeln!(
                out,
                "{name}_bucket{{{label}=\"{value}\",le=\"{}\"}} {cumulative}",
                *b as f64 / 1e6
            );
        }
        cumulative += self.buckets[STAGE_BUCKETS_US.len()];
        let _ = writeln!(
            out,
            "{name}_bucket{{{label}=\"{value}\",le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            out,
            "{name}_sum{{{label}=\"{value}\"}} {}",
            self.sum_us as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count{{{label}=\"{value}\"}} {cumulative}");
    }
}

/// Request times by API key, from a request's last byte received to its
/// response's last byte written (Kafka's RequestMetrics TotalTimeMs): one
/// histogram per key below [`REQUEST_API_KEYS`].
pub struct RequestTimes(Box<[StageHistogram]>);

/// API keys with a request-time histogram (Kafka's keys are below 100).
pub const REQUEST_API_KEYS: usize = 128;

impl Default for RequestTimes {
    fn default() -> Self {
        RequestTimes(
            (0..REQUEST_API_KEYS)
                .map(|_| StageHistogram::default())
                .collect(),
        )
    }
}

impl RequestTimes {
    pub fn observe(&self, api_key: i16, took: std::time::Duration) {
        if let Some(h) = usize::try_from(api_key).ok().and_then(|k| self.0.get(k)) {
            h.observe(took);
        }
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
    render_request_times(out, shards);
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
        (
            "rutomq_span_reads_waited_total",
            "PostgreSQL reads of a partition's spans that a fetch waited for.",
            &|s: &ShardMetrics| s.span_reads_waited.load(r),
        ),
        (
            "rutomq_span_reads_ahead_total",
            "PostgreSQL reads of a partition's next spans started ahead of its consumers.",
            &|s: &ShardMetrics| s.span_reads_ahead.load(r),
        ),
        (
            "rutomq_fetch_reads_unwaited_total",
            "Partitions a Fetch answered without records rather than wait for their object-store reads, its response having enough from other partitions (the reads go on into the read cache).",
            &|s: &ShardMetrics| s.fetch_reads_unwaited.load(r),
        ),
        (
            "rutomq_sasl_authentications_total",
            "SASL exchanges that authenticated a connection.",
            &|s: &ShardMetrics| s.sasl_authentications.load(r),
        ),
        (
            "rutomq_sasl_authentication_failures_total",
            "SASL exchanges that failed (the connection was closed).",
            &|s: &ShardMetrics| s.sasl_authentication_failures.load(r),
        ),
        (
            "rutomq_sasl_reauthentications_total",
            "SASL sessions renewed by re-authentication (KIP-368).",
            &|s: &ShardMetrics| s.sasl_reauthentications.load(r),
        ),
        (
            "rutomq_sasl_sessions_expired_total",
            "Connections closed for a request after their SASL session expired without re-authentication.",
            &|s: &ShardMetrics| s.sasl_sessions_expired.load(r),
        ),
        (
            "rutomq_requests_before_authentication_total",
            "Connections closed for sending another request before authenticating.",
            &|s: &ShardMetrics| s.requests_before_authentication.load(r),
        ),
        (
            "rutomq_share_records_acquired_total",
            "Records share fetches handed out to share group members (redeliveries included).",
            &|s: &ShardMetrics| s.share_records_acquired.load(r),
        ),
        (
            "rutomq_share_records_redelivered_total",
            "Records share fetches handed out again (released, or their lock ran out).",
            &|s: &ShardMetrics| s.share_records_redelivered.load(r),
        ),
        (
            "rutomq_share_acknowledgements_refused_total",
            "Share-partitions whose acknowledgements were refused (records not held, or malformed).",
            &|s: &ShardMetrics| s.share_acknowledgements_refused.load(r),
        ),
        (
            "rutomq_streams_internal_topics_created_total",
            "Internal topics (repartition, changelog) created for streams groups.",
            &|s: &ShardMetrics| s.streams_internal_topics_created.load(r),
        ),
        (
            "rutomq_streams_internal_topics_refused_total",
            "Internal topics of streams groups that could not be created (no CREATE permission, or refused).",
            &|s: &ShardMetrics| s.streams_internal_topics_refused.load(r),
        ),
        (
            "rutomq_authorization_denials_total",
            "Operations on a resource the authorizer refused.",
            &|s: &ShardMetrics| s.authorization_denials.load(r),
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {metric} {help}\n# TYPE {metric} counter\n{metric} {}",
            sum(f)
        );
    }
}

/// `rutomq_request_seconds{api="..."}` of every API some request used.
fn render_request_times(out: &mut String, shards: &[std::sync::Arc<ShardMetrics>]) {
    let name = "rutomq_request_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Requests by API, last byte received to response written (waiting behind the connection's earlier responses included).\n# TYPE {name} histogram"
    );
    for key in 0..REQUEST_API_KEYS {
        let mut counts = StageCounts::default();
        for s in shards {
            counts.add(&s.request_times.0[key].snapshot());
        }
        if counts.count() == 0 {
            continue;
        }
        let api = i16::try_from(key)
            .ok()
            .and_then(|k| kafka_protocol::messages::ApiKey::try_from(k).ok())
            .map_or_else(|| key.to_string(), |k| format!("{k:?}"));
        counts.render(out, name, ("api", &api));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn request_times_add_up_over_shards_by_api() {
        let (a, b) = (
            std::sync::Arc::new(ShardMetrics::default()),
            std::sync::Arc::new(ShardMetrics::default()),
        );
        a.request_times.observe(0, Duration::from_micros(700));
        b.request_times.observe(0, Duration::from_millis(40));
        b.request_times.observe(3, Duration::from_micros(100));
        // Keys no histogram covers are left out, not a panic.
        b.request_times.observe(-1, Duration::from_millis(1));
        b.request_times.observe(i16::MAX, Duration::from_millis(1));
        let mut out = String::new();
        render(&mut out, &[a, b]);
        for line in [
            "rutomq_request_seconds_bucket{api=\"Produce\",le=\"0.001\"} 1\n",
            "rutomq_request_seconds_bucket{api=\"Produce\",le=\"0.05\"} 2\n",
            "rutomq_request_seconds_count{api=\"Produce\"} 2\n",
            "rutomq_request_seconds_count{api=\"Metadata\"} 1\n",
        ] {
            assert!(out.contains(line), "{line} missing from {out}");
        }
        assert!(!out.contains("api=\"Fetch\""), "{out}");
    }

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

    #[test]
    fn stage_histogram_buckets_are_inclusive_and_cumulative() {
        let h = StageHistogram::default();
        h.observe(Duration::from_micros(250));
        h.observe(Duration::from_micros(251));
        h.observe(Duration::from_secs(1));
        let mut out = String::new();
        h.render(&mut out, "x", ("stage", "upload"));
        for line in [
            "x_bucket{stage=\"upload\",le=\"0.00025\"} 1\n",
            "x_bucket{stage=\"upload\",le=\"0.0005\"} 2\n",
            "x_bucket{stage=\"upload\",le=\"0.5\"} 2\n",
            "x_bucket{stage=\"upload\",le=\"+Inf\"} 3\n",
            "x_count{stage=\"upload\"} 3\n",
        ] {
            assert!(out.contains(line), "{line} not in {out}");
        }
    }
}

/// What the transaction coordinator did, for `/metrics`.
#[derive(Default, Debug)]
pub struct TxnStats {
    pub inits: AtomicU64,
    pub commits: AtomicU64,
    pub aborts: AtomicU64,
    pub timeout_aborts: AtomicU64,
    pub operator_aborts: AtomicU64,
    /// Coordinator requests answered with an error.
    pub refused: AtomicU64,
    pub expired_ids: AtomicU64,
    /// How long coordinator changes took (one PostgreSQL transaction each),
    /// by request: [`TXN_CHANGE_REQUESTS`], the last for any other.
    changes: [StageHistogram; TXN_CHANGE_REQUESTS.len()],
}

/// The requests whose coordinator changes are timed apart.
pub const TXN_CHANGE_REQUESTS: [&str; 5] = [
    "InitProducerId",
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "other",
];

impl TxnStats {
    pub fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A change for request `what` took `took`.
    pub fn observe_change(&self, what: &str, took: std::time::Duration) {
        let i = TXN_CHANGE_REQUESTS
            .iter()
            .position(|&r| r == what)
            .unwrap_or(TXN_CHANGE_REQUESTS.len() - 1);
        self.changes[i].observe(took);
    }

    /// `/metrics` lines of the change histograms.
    pub fn render(&self, out: &mut String) {
        let name = "rutomq_txn_change_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Transaction coordinator changes (one PostgreSQL transaction each, locks included) by request.\n# TYPE {name} histogram"
        );
        for (request, h) in TXN_CHANGE_REQUESTS.iter().zip(&self.changes) {
            h.render(out, name, ("request", request));
        }
    }
}

/// What the compactors did, for `/metrics`.
#[derive(Default)]
pub struct CompactionStats {
    pub passes: AtomicU64,
    pub passes_failed: AtomicU64,
    /// Passes that committed nothing: lease lost, or the log changed.
    pub passes_abandoned: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub bytes_removed: AtomicU64,
    pub records_removed: AtomicU64,
    pub markers_removed: AtomicU64,
    /// Per partition led here: (dirty ratio, compaction lag in ms), as
    /// of the last round.
    pub partitions: std::sync::Mutex<std::collections::HashMap<(String, i32), (f64, i64)>>,
}

impl CompactionStats {
    /// `/metrics` lines of the per-partition gauges.
    pub fn render(&self, out: &mut String) {
        let parts = self.partitions.lock().expect("stats lock");
        let mut rows: Vec<_> = parts.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        for (name, help, pick) in [
            (
                "rutomq_compaction_dirty_ratio",
                "Dirty bytes (not compacted yet) over retained bytes, per compacted partition this agent leads.",
                0,
            ),
            (
                "rutomq_compaction_lag_seconds",
                "Age of the oldest dirty records, per compacted partition this agent leads.",
                1,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for ((topic, partition), (ratio, lag_ms)) in &rows {
                let v = if pick == 0 { *ratio } else { *lag_ms as f64 / 1000.0 };
                let _ = writeln!(out, "{name}{{topic=\"{topic}\",partition=\"{partition}\"}} {v}");
            }
        }
    }
}

/// A label value as Prometheus' text format writes it (backslash, quote
/// and newline escaped): for names clients choose, such as group ids.
pub fn label_value(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return std::borrow::Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 2);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod label_tests {
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(super::label_value("plain-group"), "plain-group");
        assert_eq!(super::label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
