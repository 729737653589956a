//! What a run measures: counters and latency histograms shared by the
//! connection tasks, the broker's CPU time and memory read from `/proc`,
//! rutomq's `/metrics` counters, and what a result file says of the run
//! (time, git revision, machine). Shared by `rutomq-bench` and
//! `rutomq-meta-load`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Latencies are recorded in microseconds, up to an hour.
const LATENCY_US_MAX: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Records `us` microseconds in `h` (clamped into its bounds).
pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, LATENCY_US_MAX));
}

/// Percentiles (ms) of a latency histogram in microseconds; null when empty.
pub fn histogram_json(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return Value::Null;
    }
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    json!({"p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "p999": ms(0.999),
           "max": h.max() as f64 / 1000.0, "mean": h.mean() / 1000.0, "count": h.len()})
}

/// Shared by every connection task of a run. Counters before the warmup
/// ends go to `*_total` only.
pub struct Shared {
    pub measuring: Arc<AtomicBool>,
    pub stop: Arc<AtomicBool>,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub records_total: AtomicU64,
    pub errors: AtomicU64,
    /// Requests sent (produce) or fetches answered (consume).
    pub requests: AtomicU64,
    pub latency: Mutex<Histogram<u64>>,
    /// Produce: from when a request was due until it was written to the
    /// socket whole (the client's own share of the latency, with the wait
    /// for the broker to read it).
    pub send_lag: Mutex<Histogram<u64>>,
    /// Kafka error code -> partitions that got it.
    pub error_codes: Mutex<BTreeMap<i16, u64>>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared::new()
    }
}

impl Shared {
    pub fn new() -> Shared {
        Shared::with_flags(Arc::default(), Arc::default())
    }

    /// Counters of their own, but the same warmup and stop flags as
    /// `other` (the producer side of an e2e run).
    pub fn linked(other: &Shared) -> Shared {
        Shared::with_flags(other.measuring.clone(), other.stop.clone())
    }

    fn with_flags(measuring: Arc<AtomicBool>, stop: Arc<AtomicBool>) -> Shared {
        Shared {
            measuring,
            stop,
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            records_total: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            latency: Mutex::new(new_histogram()),
            send_lag: Mutex::new(new_histogram()),
            error_codes: Mutex::new(BTreeMap::new()),
        }
    }

    /// Counts `records` (of `bytes` payload) done; `latency_us` for each of
    /// them when given.
    pub fn done(&self, records: u64, bytes: u64, latency_us: Option<u64>) {
        self.records_total.fetch_add(records, Ordering::Relaxed);
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(us) = latency_us {
            let mut h = self.latency.lock().unwrap_or_else(|e| e.into_inner());
            h.saturating_record_n(us.clamp(1, LATENCY_US_MAX), records.max(1));
        }
    }

    /// Records that a request due `lag_us` ago was just written whole.
    pub fn sent(&self, lag_us: u64) {
        if self.measuring.load(Ordering::Relaxed) {
            let mut h = self.send_lag.lock().unwrap_or_else(|e| e.into_inner());
            h.saturating_record(lag_us.clamp(1, LATENCY_US_MAX));
        }
    }

    /// Counts a partition answered with Kafka error `code`; true the first
    /// time this code is seen.
    pub fn error(&self, code: i16) -> bool {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut m = self.error_codes.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(code).or_default();
        *n += 1;
        *n == 1
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// CPU time and resident memory of broker processes and their descendants.
pub struct Broker {
    roots: Vec<u32>,
    ticks_per_s: f64,
}

#[derive(Clone, Debug)]
pub struct BrokerSample {
    /// CPU seconds per root pid (the process and all its descendants).
    pub cpu: Vec<f64>,
    /// VmRSS of the first root pid itself, KiB.
    pub rss_kib: u64,
}

impl Broker {
    pub fn new(roots: Vec<u32>) -> Broker {
        let ticks_per_s = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0);
        Broker { roots, ticks_per_s }
    }

    pub fn sample(&self) -> Result<BrokerSample> {
        // pid -> (ppid, utime + stime in ticks)
        let mut procs: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
        for entry in std::fs::read_dir("/proc")? {
            let Ok(pid) = entry?.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // Fields after the parenthesised command name.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() < 13 {
                continue;
            }
            let ppid: u32 = f[1].parse().unwrap_or(0);
            let ticks: u64 = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
            procs.insert(pid, (ppid, ticks));
        }
        let mut cpu = Vec::new();
        for &root in &self.roots {
            if !procs.contains_key(&root) {
                bail!("broker process {root} is gone");
            }
            let mut ticks = 0u64;
            for (&pid, &(_, t)) in &procs {
                let mut p = pid;
                // Walk up to init; a descendant of `root` meets it.
                for _ in 0..64 {
                    if p == root {
                        ticks += t;
                        break;
                    }
                    match procs.get(&p) {
                        Some(&(pp, _)) if pp != 0 && pp != p => p = pp,
                        _ => break,
                    }
                }
            }
            cpu.push(ticks as f64 / self.ticks_per_s);
        }
        let rss_kib = match self.roots.first() {
            Some(root) => std::fs::read_to_string(format!("/proc/{root}/status"))?
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0),
            None => 0,
        };
        Ok(BrokerSample { cpu, rss_kib })
    }
}

/// rutomq's Prometheus counters, `rutomq_` prefix and `_total` suffix cut.
pub fn scrape(url: &str) -> Result<BTreeMap<String, f64>> {
    let rest = url
        .strip_prefix("http://")
        .context("--metrics-url must be http://host:port/path")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host).with_context(|| format!("connect {host}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("bad HTTP response from {url}");
    };
    if !head.starts_with("HTTP/1.1 200") {
        bail!("{url}: {}", head.lines().next().unwrap_or(""));
    }
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let mut it = line.split_whitespace();
        let (Some(name), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        if name.contains('{') {
            continue;
        }
        if let (Some(n), Ok(v)) = (name.strip_prefix("rutomq_"), v.parse::<f64>()) {
            out.insert(n.trim_end_matches("_total").to_owned(), v);
        }
    }
    Ok(out)
}

/// Now, UTC, as 20261201T120000Z.
pub fn utc_stamp() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown-time".into(), |s| s.trim().to_owned())
}

/// The revision of this checkout and whether tracked files differ from it.
pub fn git_rev() -> Value {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
    };
    json!({
        "rev": run(&["rev-parse", "HEAD"]),
        "dirty": run(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()),
    })
}

/// Cores, kernel, CPU model and memory of this machine.
pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines().find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
    });
    json!({
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_owned()),
        "cpu": cpu,
        "memory_kib": std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| s.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok())),
    })
}
