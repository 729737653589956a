//! Client telemetry (KIP-714): clients ask which of their metrics to push
//! (GetTelemetrySubscriptions), the client-metrics subscriptions whose
//! `match` selects them say which and how often, and their pushes
//! (PushTelemetry, OTLP metrics) are exported on `/metrics` as
//! `rutomq_client_metric`, so operators see client-side figures without
//! touching the applications.
//!
//! The state is the agent's (a client pushes to the agent it asked, as
//! Kafka's clients do): its client instances, bounded in number, and the
//! last value of each series they pushed, bounded in number; a client
//! silent for three push intervals (a terminating one too) is dropped with
//! its series.

pub mod otlp;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use uuid::Uuid;

use crate::dynamic::Subscription;
use crate::error::ErrorCode;
use crate::limits::{
    TELEMETRY_CLIENTS_MAX, TELEMETRY_MAX_BYTES, TELEMETRY_POINTS_MAX,
    TELEMETRY_PUSH_POINT_BYTES_MAX, TELEMETRY_SERIES_BYTES_MAX, TELEMETRY_SERIES_MAX,
};

/// The push interval of a client no subscription selects (Kafka's).
pub const DEFAULT_INTERVAL_MS: i32 = 300_000;

/// Compression types accepted for pushes, in order of preference (zstd,
/// lz4, gzip, snappy; none is always accepted).
pub const ACCEPTED_COMPRESSION: &[i8] = &[4, 3, 1, 2];

/// Who a client is, as a subscription's `match` selects on.
#[derive(Clone, Debug, Default)]
pub struct ClientAttrs {
    pub client_id: String,
    pub software_name: String,
    pub software_version: String,
    pub source: Option<SocketAddr>,
}

impl ClientAttrs {
    fn value(&self, key: &str, instance: Uuid) -> String {
        match key {
            "client_instance_id" => instance.to_string(),
            "client_id" => self.client_id.clone(),
            "client_software_name" => self.software_name.clone(),
            "client_software_version" => self.software_version.clone(),
            "client_source_address" => self.source.map_or(String::new(), |s| s.ip().to_string()),
            "client_source_port" => self.source.map_or(String::new(), |s| s.port().to_string()),
            _ => String::new(),
        }
    }
}

/// What GetTelemetrySubscriptions answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub error: ErrorCode,
    pub instance: Uuid,
    pub subscription_id: i32,
    pub push_interval_ms: i32,
    /// Metric name prefixes: empty, none; `[""]`, all.
    pub metrics: Vec<String>,
}

/// A push.
pub struct Push<'a> {
    pub instance: Uuid,
    pub subscription_id: i32,
    pub terminating: bool,
    pub compression: i8,
    pub payload: &'a [u8],
}

struct Client {
    attrs: ClientAttrs,
    subscription_id: i32,
    interval_ms: i64,
    last_get_ms: Option<i64>,
    last_push_ms: Option<i64>,
    /// The last answer to a Get was an error (the next Get is not early).
    errored: bool,
    terminating: bool,
    seen_ms: i64,
}

/// A series: client instance, metric name and attributes (a client's
/// series sort together).
type SeriesKey = (Uuid, String, Vec<(String, String)>);

#[derive(Default)]
struct State {
    clients: HashMap<Uuid, Client>,
    series: BTreeMap<SeriesKey, f64>,
    /// Bytes of names and attributes the series hold.
    series_bytes: usize,
    last_sweep_ms: i64,
}

fn key_bytes((_, name, attrs): &SeriesKey) -> usize {
    name.len() + attrs.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
}

/// What the subscriptions selecting a client ask: metric prefixes (`[""]`:
/// all), push interval, subscription id.
fn wanted(subs: &[Subscription], attrs: &ClientAttrs, instance: Uuid) -> (Vec<String>, i32, i32) {
    let selected = selecting(subs, attrs, instance);
    let mut metrics: Vec<String> = selected
        .iter()
        .flat_map(|s| s.metrics.iter().cloned())
        .collect();
    metrics.sort_unstable();
    metrics.dedup();
    if metrics.iter().any(|m| m == "*" || m.is_empty()) {
        metrics = vec![String::new()];
    }
    let interval = selected
        .iter()
        .map(|s| s.interval_ms)
        .min()
        .unwrap_or(DEFAULT_INTERVAL_MS);
    let id = subscription_id(&metrics, interval);
    (metrics, interval, id)
}

/// Counters for `/metrics`.
#[derive(Default)]
pub struct TelemetryStats {
    pub pushes: AtomicU64,
    pub refused: AtomicU64,
    pub points_dropped: AtomicU64,
    /// Pushes written into `--client-telemetry-topic`, and those that could not be.
    pub exported: AtomicU64,
    pub export_failed: AtomicU64,
}

/// An agent's client telemetry.
#[derive(Default)]
pub struct Telemetry {
    state: Mutex<State>,
    pub stats: TelemetryStats,
}

/// The subscriptions that select a client: each of their `match`
/// patterns matches it (no patterns: every client).
fn selecting<'a>(
    subs: &'a [Subscription],
    attrs: &ClientAttrs,
    instance: Uuid,
) -> Vec<&'a Subscription> {
    subs.iter()
        .filter(|s| !s.metrics.is_empty())
        .filter(|s| {
            s.matches
                .iter()
                .all(|(k, re)| re.is_match(&attrs.value(k, instance)))
        })
        .collect()
}

/// A stable id of what the selecting subscriptions ask.
fn subscription_id(metrics: &[String], interval_ms: i32) -> i32 {
    let mut h = crc32c::crc32c(&interval_ms.to_be_bytes());
    for m in metrics {
        h = crc32c::crc32c_append(h, m.as_bytes());
        h = crc32c::crc32c_append(h, b"\0");
    }
    h as i32
}

impl Telemetry {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answers GetTelemetrySubscriptions at `now_ms`: the client's
    /// instance (a new one for the zero id), what to push and how often.
    pub fn subscribe(
        &self,
        subs: &[Subscription],
        attrs: ClientAttrs,
        instance: Uuid,
        now_ms: i64,
    ) -> Answer {
        let instance = if instance.is_nil() {
            Uuid::new_v4()
        } else {
            instance
        };
        let (metrics, push_interval_ms, id) = wanted(subs, &attrs, instance);
        let mut st = self.lock();
        sweep(&mut st, now_ms);
        if !st.clients.contains_key(&instance) && st.clients.len() >= TELEMETRY_CLIENTS_MAX {
            evict_oldest(&mut st);
        }
        let c = st.clients.entry(instance).or_insert_with(|| Client {
            attrs: attrs.clone(),
            subscription_id: id,
            interval_ms: i64::from(push_interval_ms),
            last_get_ms: None,
            last_push_ms: None,
            errored: false,
            terminating: false,
            seen_ms: now_ms,
        });
        let early = c
            .last_get_ms
            .is_some_and(|t| now_ms - t < c.interval_ms && !c.errored && c.subscription_id == id);
        c.seen_ms = now_ms;
        c.attrs = attrs;
        if early {
            c.errored = true;
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            return Answer {
                error: ErrorCode::ThrottlingQuotaExceeded,
                instance,
                subscription_id: id,
                push_interval_ms,
                metrics,
            };
        }
        c.last_get_ms = Some(now_ms);
        c.errored = false;
        c.subscription_id = id;
        c.interval_ms = i64::from(push_interval_ms);
        c.terminating = false;
        Answer {
            error: ErrorCode::None,
            instance,
            subscription_id: id,
            push_interval_ms,
            metrics,
        }
    }

    /// Takes a push at `now_ms`: checked as Kafka checks it, decompressed
    /// (bounded) and decoded, its points kept as the client's series.
    /// Returns the metrics as OTLP, decompressed (PushTelemetry may write
    /// them into a topic), or the refusal.
    pub fn push(
        &self,
        subs: &[Subscription],
        attrs: &ClientAttrs,
        p: Push<'_>,
        now_ms: i64,
    ) -> Result<Vec<u8>, (ErrorCode, String)> {
        let refuse = |code: ErrorCode, msg: &str| {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            Err((code, msg.to_owned()))
        };
        if p.instance.is_nil() {
            return refuse(ErrorCode::InvalidRequest, "the client instance id is zero");
        }
        // What the client's subscription is now (it may have changed).
        let (_, _, current) = wanted(subs, attrs, p.instance);
        {
            let mut st = self.lock();
            sweep(&mut st, now_ms);
            let Some(c) = st.clients.get_mut(&p.instance) else {
                return refuse(
                    ErrorCode::UnknownSubscriptionId,
                    "unknown client instance: get its subscription first",
                );
            };
            c.seen_ms = now_ms;
            // Checked in Kafka's order.
            if c.terminating {
                return refuse(
                    ErrorCode::InvalidRequest,
                    "the client instance is terminating already",
                );
            }
            // Pushes come once per interval (jittered): one sooner than
            // half of it is throttled, unless it is the last.
            let early = c
                .last_push_ms
                .is_some_and(|t| now_ms - t < c.interval_ms / 2);
            if early && !p.terminating {
                return refuse(
                    ErrorCode::ThrottlingQuotaExceeded,
                    "pushed before the push interval",
                );
            }
            if c.subscription_id != p.subscription_id || current != p.subscription_id {
                return refuse(
                    ErrorCode::UnknownSubscriptionId,
                    "the subscription changed: get it again",
                );
            }
            if p.compression != 0 && !ACCEPTED_COMPRESSION.contains(&p.compression) {
                return refuse(
                    ErrorCode::UnsupportedCompressionType,
                    "compression type not accepted",
                );
            }
            if p.payload.len() > TELEMETRY_MAX_BYTES as usize {
                return refuse(
                    ErrorCode::TelemetryTooLarge,
                    "metrics larger than telemetry_max_bytes",
                );
            }
        }
        let raw: Vec<u8> = match decompress(p.compression, p.payload) {
            Ok(raw) => raw,
            Err(msg) => return refuse(ErrorCode::InvalidRecord, &msg),
        };
        let points = match otlp::decode(&raw, TELEMETRY_POINTS_MAX, TELEMETRY_PUSH_POINT_BYTES_MAX)
        {
            Ok(points) => points,
            Err(otlp::Malformed(why)) => {
                return refuse(
                    ErrorCode::InvalidRecord,
                    &format!("not OTLP metrics: {why}"),
                )
            }
        };
        self.stats.pushes.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock();
        let State {
            clients,
            series,
            series_bytes,
            ..
        } = &mut *st;
        let Some(c) = clients.get_mut(&p.instance) else {
            return Ok(raw); // forgotten meanwhile: no series to keep
        };
        c.last_push_ms = Some(now_ms);
        c.terminating = p.terminating;
        for pt in points {
            let key = (p.instance, pt.name, pt.attributes);
            if !series.contains_key(&key) {
                let size = key_bytes(&key);
                if series.len() >= TELEMETRY_SERIES_MAX
                    || *series_bytes + size > TELEMETRY_SERIES_BYTES_MAX
                {
                    self.stats.points_dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                *series_bytes += size;
            }
            series.insert(key, pt.value);
        }
        // A terminating client's last values stay until it is swept, so a
        // scrape still sees them.
        Ok(raw)
    }

    /// Client instances known now.
    pub fn clients(&self) -> usize {
        self.lock().clients.len()
    }

    /// The exported series, and the counters, in Prometheus' text format.
    pub fn render(&self, out: &mut String, now_ms: i64) {
        let mut st = self.lock();
        sweep(&mut st, now_ms);
        let s = &self.stats;
        let r = Ordering::Relaxed;
        for (name, kind, help, v) in [
            (
                "rutomq_client_telemetry_pushes_total",
                "counter",
                "PushTelemetry requests taken.",
                s.pushes.load(r),
            ),
            (
                "rutomq_client_telemetry_refused_total",
                "counter",
                "GetTelemetrySubscriptions and PushTelemetry requests refused.",
                s.refused.load(r),
            ),
            (
                "rutomq_client_telemetry_points_dropped_total",
                "counter",
                "Pushed points dropped: past the series limit.",
                s.points_dropped.load(r),
            ),
            (
                "rutomq_client_telemetry_exported_total",
                "counter",
                "Pushes written into the client telemetry topic.",
                s.exported.load(r),
            ),
            (
                "rutomq_client_telemetry_export_failed_total",
                "counter",
                "Pushes that could not be written into the client telemetry topic (logged).",
                s.export_failed.load(r),
            ),
            (
                "rutomq_client_telemetry_clients",
                "gauge",
                "Client instances this agent keeps telemetry of.",
                st.clients.len() as u64,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
        let name = "rutomq_client_metric";
        let _ = writeln!(out, "# HELP {name} The last value clients pushed of each of their metrics (KIP-714; the metric's name in label `name`, its attributes as labels).\n# TYPE {name} gauge");
        let mut labels: Vec<String> = Vec::new();
        for ((instance, metric, attrs), v) in &st.series {
            let client_id = st
                .clients
                .get(instance)
                .map_or("", |c| c.attrs.client_id.as_str());
            let _ = write!(
                out,
                "{name}{{name=\"{}\",client_instance_id=\"{instance}\",client_id=\"{}\"",
                crate::metrics::label_value(metric),
                crate::metrics::label_value(client_id)
            );
            // Two keys may clean up to one label name: the first is kept
            // (a repeated label would spoil the whole page).
            labels.clear();
            for (k, val) in attrs {
                let l = label(k);
                if !labels.contains(&l) {
                    let _ = write!(out, ",{l}=\"{}\"", crate::metrics::label_value(val));
                    labels.push(l);
                }
            }
            let _ = writeln!(out, "}} {v}");
        }
    }
}

/// Drops the clients silent for three of their push intervals, with their
/// series (looked for at most once a second).
fn sweep(st: &mut State, now_ms: i64) {
    if now_ms - st.last_sweep_ms < 1000 && now_ms >= st.last_sweep_ms {
        return;
    }
    st.last_sweep_ms = now_ms;
    let gone: Vec<Uuid> = st
        .clients
        .iter()
        .filter(|(_, c)| now_ms - c.seen_ms > 3 * c.interval_ms.max(1))
        .map(|(id, _)| *id)
        .collect();
    for id in gone {
        forget(st, id);
    }
}

fn evict_oldest(st: &mut State) {
    if let Some(id) = st
        .clients
        .iter()
        .min_by_key(|(_, c)| c.seen_ms)
        .map(|(id, _)| *id)
    {
        forget(st, id);
    }
}

fn forget(st: &mut State, instance: Uuid) {
    st.clients.remove(&instance);
    let from = (instance, String::new(), Vec::new());
    let keys: Vec<SeriesKey> = st
        .series
        .range(from..)
        .take_while(|((i, _, _), _)| *i == instance)
        .map(|(k, _)| k.clone())
        .collect();
    for k in keys {
        st.series_bytes -= key_bytes(&k);
        st.series.remove(&k);
    }
}

fn decompress(codec: i8, payload: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let reader =
        crate::records::records_reader(i16::from(codec), payload).map_err(|e| e.message)?;
    let mut raw = Vec::new();
    reader
        .take(crate::limits::TELEMETRY_DECOMPRESSED_MAX + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot decompress the metrics: {e}"))?;
    if raw.len() as u64 > crate::limits::TELEMETRY_DECOMPRESSED_MAX {
        return Err("the metrics decompress to more than the agent takes".into());
    }
    Ok(raw)
}

/// A Prometheus label name from an attribute key.
fn label(key: &str) -> String {
    let mut s: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) || s.starts_with("__") {
        s.insert_str(0, "attr_");
    }
    if matches!(s.as_str(), "name" | "client_instance_id" | "client_id") {
        s.insert_str(0, "attr_");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(metrics: &[&str], interval_ms: i32, matches: &str) -> Subscription {
        Subscription {
            name: "s".into(),
            metrics: metrics.iter().map(|m| m.to_string()).collect(),
            interval_ms,
            matches: crate::dynamic::match_patterns(matches).unwrap(),
        }
    }

    /// A push's answer as its error code.
    fn code<T>(r: Result<T, (ErrorCode, String)>) -> ErrorCode {
        r.map_or_else(|e| e.0, |_| ErrorCode::None)
    }

    fn attrs(client_id: &str) -> ClientAttrs {
        ClientAttrs {
            client_id: client_id.into(),
            ..ClientAttrs::default()
        }
    }

    #[test]
    fn subscriptions_select_clients_and_pushes_become_series() {
        let t = Telemetry::default();
        let subs = vec![sub(
            &["org.apache.kafka.producer."],
            1000,
            "client_id=app-.*",
        )];
        let other = t.subscribe(&subs, attrs("batch"), Uuid::nil(), 0);
        assert!(other.metrics.is_empty() && other.push_interval_ms == DEFAULT_INTERVAL_MS);
        let a = t.subscribe(&subs, attrs("app-1"), Uuid::nil(), 0);
        assert_eq!((a.error, a.push_interval_ms), (ErrorCode::None, 1000));
        assert_eq!(a.metrics, vec!["org.apache.kafka.producer.".to_owned()]);
        // Asking again before the interval is throttled.
        assert_eq!(
            t.subscribe(&subs, attrs("app-1"), a.instance, 10).error,
            ErrorCode::ThrottlingQuotaExceeded
        );
        let data = otlp::write::gauge(
            "org.apache.kafka.producer.request.latency.avg",
            4.5,
            ("node_id", "1"),
        );
        let push = |id, sub_id, at| {
            code(t.push(
                &subs,
                &attrs("app-1"),
                Push {
                    instance: id,
                    subscription_id: sub_id,
                    terminating: false,
                    compression: 0,
                    payload: &data,
                },
                at,
            ))
        };
        assert_eq!(
            push(a.instance, a.subscription_id + 1, 1000),
            ErrorCode::UnknownSubscriptionId
        );
        assert_eq!(push(a.instance, a.subscription_id, 1000), ErrorCode::None);
        assert_eq!(
            push(a.instance, a.subscription_id, 1100),
            ErrorCode::ThrottlingQuotaExceeded
        );
        let mut out = String::new();
        t.render(&mut out, 1200);
        assert!(
            out.contains(
                "rutomq_client_metric{name=\"org.apache.kafka.producer.request.latency.avg\""
            ),
            "{out}"
        );
        assert!(
            out.contains("client_id=\"app-1\",client_rack=\"r1\",node_id=\"1\"} 4.5"),
            "{out}"
        );
        // Silent for three intervals: forgotten with its series.
        let mut out = String::new();
        t.render(&mut out, 10_000);
        assert!(!out.contains("latency.avg"), "{out}");
    }

    #[test]
    fn a_terminating_push_ends_the_client() {
        let t = Telemetry::default();
        let subs = vec![sub(&["*"], 500, "")];
        let a = t.subscribe(&subs, attrs("c"), Uuid::nil(), 0);
        assert_eq!(a.metrics, vec![String::new()], "all metrics");
        let data = otlp::write::gauge("m", 1.0, ("k", "v"));
        let p = Push {
            instance: a.instance,
            subscription_id: a.subscription_id,
            terminating: true,
            compression: 1,
            payload: &data,
        };
        // gzip was announced but the payload is not gzip: refused.
        assert_eq!(
            code(t.push(&subs, &attrs("c"), p, 1)),
            ErrorCode::InvalidRecord
        );
        let p = |_at: i64| Push {
            instance: a.instance,
            subscription_id: a.subscription_id,
            terminating: true,
            compression: 0,
            payload: &data,
        };
        assert_eq!(
            t.push(&subs, &attrs("c"), p(2), 2).ok(),
            Some(data.clone()),
            "the OTLP bytes"
        );
        assert_eq!(
            code(t.push(&subs, &attrs("c"), p(3), 3)),
            ErrorCode::InvalidRequest,
            "terminating already"
        );
        let mut out = String::new();
        t.render(&mut out, 4);
        assert!(
            out.contains("rutomq_client_metric{name=\"m\""),
            "kept for a while: {out}"
        );
        t.render(&mut out, 2000);
        assert_eq!(t.clients(), 0);
    }
}
