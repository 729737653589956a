//! `rutomq-bench`: a Kafka-protocol load generator shaped like the
//! OpenMessaging Benchmark workloads, for rutomq and any Kafka broker.
//!
//! It speaks the protocol itself with pre-built record batches over many
//! pipelined connections, so the client is not the bottleneck. Modes:
//! `produce`, `consume` (from the beginning or the tail) and `e2e` (produce
//! and consume at once, latency from producer timestamp to consumer). It
//! prints a progress line every second and a summary, and writes a JSON
//! result with the workload, git revision and machine.

mod consume;
mod produce;
mod txn;
mod wire;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use kafka_protocol::records::Compression;
use serde_json::{json, Value};

use rutomq_bench::stats::{self, git_rev, machine, utc_stamp, Broker, BrokerSample, Shared};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    Produce,
    Consume,
    E2e,
    /// Transactional producers: --producers transactional ids, each
    /// committing transactions of --txn-batches Produce requests; the
    /// latency is the commit's.
    Txn,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    fn compression(self) -> Compression {
        match self {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum From {
    Beginning,
    Tail,
}

#[derive(Parser, Debug)]
#[command(name = "rutomq-bench", version, about)]
struct Args {
    /// What to run.
    #[arg(value_enum)]
    mode: Mode,
    /// Broker address (every connection goes there).
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Connect with TLS, trusting the CA in this PEM file (an SSL listener).
    #[arg(long)]
    tls_ca: Option<std::path::PathBuf>,
    /// Log in with SASL/PLAIN as USER:PASSWORD on every connection (a
    /// SASL_PLAINTEXT listener; SASL_SSL with --tls-ca).
    #[arg(long)]
    sasl_plain: Option<String>,
    /// Topic name; with --topics N > 1 the topics are NAME-0 .. NAME-(N-1).
    #[arg(long, default_value = "bench")]
    topic: String,
    #[arg(long, default_value_t = 1)]
    topics: usize,
    /// Partitions per topic.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Create the topics first (an existing topic is fine).
    #[arg(long)]
    create: bool,
    /// A config of the created topics, KEY=VALUE (repeatable), e.g.
    /// retention.bytes=1073741824 for runs longer than the disk holds.
    #[arg(long = "topic-config", value_parser = parse_topic_config)]
    topic_configs: Vec<(String, String)>,
    /// Bytes of value per record.
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Give produced records keys (`k00000000`.. by index in the batch), as
    /// compacted topics need; every batch then overwrites the same keys, so
    /// a compactor keeps one batch's worth per partition. Default: no key.
    #[arg(long)]
    keyed: bool,
    /// Records per batch; a produce request holds one batch per partition of
    /// its connection.
    #[arg(long, default_value_t = 64)]
    batch_records: usize,
    /// Producer connections. More than partitions: partitions are shared
    /// (connection i sends to partition i mod partitions), which deepens the
    /// pipeline when acks are slow.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// Produce requests in flight per connection. Deep, because each holds
    /// one pre-built batch per partition and there is no accumulator: with
    /// a 30-50 ms ack (S3-like stores) throughput is in-flight bytes over
    /// latency.
    #[arg(long, default_value_t = 32)]
    in_flight: usize,
    /// Records per second over all producers (txn: in whole transactions,
    /// so commits/s = rate / records per transaction); 0 = as fast as the
    /// broker acks.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Seconds to run (after the warmup). Default 30 unless --records is set.
    #[arg(long)]
    duration: Option<f64>,
    /// Stop after this many records (produced, or consumed), warmup included.
    #[arg(long)]
    records: Option<u64>,
    /// Seconds at the start that are not measured.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// -1 (all), 1 or 0.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    acks: i16,
    #[arg(long, value_enum, default_value_t = Codec::None)]
    compression: Codec,
    /// Consumer connections (consume and e2e).
    #[arg(long, default_value_t = 2)]
    consumers: usize,
    /// Independent readers of every partition (consume and e2e): N copies
    /// of the --consumers connections, each copy reading all partitions, as
    /// N consumer groups would (without their offset commits). Throughput
    /// and latency are over all of them.
    #[arg(long, default_value_t = 1)]
    fanout: usize,
    /// Where consumers start (default: beginning for consume, tail for e2e).
    #[arg(long, value_enum)]
    from: Option<From>,
    #[arg(long, default_value_t = 500)]
    fetch_max_wait_ms: i32,
    #[arg(long, default_value_t = 50 << 20)]
    fetch_max_bytes: i32,
    #[arg(long, default_value_t = 1 << 20)]
    partition_max_bytes: i32,
    /// Broker process whose CPU time (with its descendants) and memory are
    /// measured; repeat for several (e.g. rutomq and its PostgreSQL).
    #[arg(long)]
    broker_pid: Vec<u32>,
    /// rutomq's /metrics URL: PUT, transaction and window counts of the run.
    #[arg(long)]
    metrics_url: Option<String>,
    /// Name of the system under test, for the result file.
    #[arg(long, default_value = "broker")]
    label: String,
    /// Result file; default benches/results/raw/<time>-<label>-<mode>.json.
    #[arg(long)]
    out: Option<String>,
    /// Write no result file.
    #[arg(long)]
    no_out: bool,
    /// Txn: Produce requests per transaction.
    #[arg(long, default_value_t = 4)]
    txn_batches: usize,
    /// Txn: transaction.timeout.ms of the transactional ids.
    #[arg(long, default_value_t = 60_000)]
    txn_timeout_ms: i32,
    /// Consume: read committed records only (isolation level 1).
    #[arg(long)]
    read_committed: bool,
    /// Client worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(ca) = &args.tls_ca {
        wire::use_tls(ca)?;
    }
    if let Some(user_password) = &args.sasl_plain {
        wire::use_sasl_plain(user_password)?;
    }
    if args.record_size == 0 || args.batch_records == 0 || args.partitions < 1 || args.topics == 0 {
        bail!("--record-size, --batch-records, --partitions and --topics must be positive");
    }
    if ![-1, 0, 1].contains(&args.acks) {
        bail!("--acks must be -1, 0 or 1");
    }
    if args.mode != Mode::Consume && (args.producers == 0 || args.in_flight == 0) {
        bail!("--producers and --in-flight must be positive");
    }
    if args.mode != Mode::Produce && args.consumers == 0 {
        bail!("--consumers must be positive");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}

fn topics(args: &Args) -> Vec<String> {
    if args.topics == 1 {
        vec![args.topic.clone()]
    } else {
        (0..args.topics)
            .map(|i| format!("{}-{i}", args.topic))
            .collect()
    }
}

/// Deals the partitions out round-robin to `n` connections.
fn deal<T: Clone>(all: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.min(all.len()).max(1);
    let mut out = vec![Vec::new(); n];
    for (i, x) in all.iter().enumerate() {
        out[i % n].push(x.clone());
    }
    out
}

/// The producers' partitions: dealt out as by [`deal`], and when there are
/// more connections than partitions, each partition is shared by several
/// (connection i sends to partition i mod partitions).
fn deal_producers<T: Clone>(all: &[T], n: usize) -> Vec<Vec<T>> {
    if n <= all.len() || all.is_empty() {
        return deal(all, n);
    }
    (0..n).map(|i| vec![all[i % all.len()].clone()]).collect()
}

fn parse_topic_config(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

async fn run(args: Args) -> Result<()> {
    let topics = topics(&args);
    if args.create {
        wire::create_topics(
            &args.bootstrap,
            &topics,
            args.partitions,
            &args.topic_configs,
        )
        .await?;
    }
    let parts: Vec<(String, i32)> = topics
        .iter()
        .flat_map(|t| (0..args.partitions).map(move |p| (t.clone(), p)))
        .collect();
    let duration = match (args.duration, args.records) {
        (Some(d), _) => Some(Duration::from_secs_f64(d)),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(30)),
    };
    let shared = Arc::new(Shared::new());
    // In e2e runs `shared` is the consumers' (end-to-end latency); the
    // producers count their acks apart.
    let pshared = if args.mode == Mode::E2e {
        Arc::new(Shared::linked(&shared))
    } else {
        shared.clone()
    };
    let mut tasks = tokio::task::JoinSet::new();

    if !matches!(args.mode, Mode::Produce | Mode::Txn) {
        let from = args.from.unwrap_or(if args.mode == Mode::E2e {
            From::Tail
        } else {
            From::Beginning
        });
        let which = if from == From::Tail { -1 } else { -2 };
        let offsets = wire::list_offsets(&args.bootstrap, &parts, which).await?;
        let with_offsets: Vec<(String, i32, i64)> = parts
            .iter()
            .zip(offsets)
            .map(|((t, p), o)| (t.clone(), *p, o))
            .collect();
        let copies = std::iter::repeat_n(&with_offsets, args.fanout.max(1));
        for mine in copies.flat_map(|all| deal(all, args.consumers)) {
            let cfg = consume::ConsumerConfig {
                addr: args.bootstrap.clone(),
                parts: mine,
                max_wait_ms: args.fetch_max_wait_ms,
                max_bytes: args.fetch_max_bytes,
                partition_max_bytes: args.partition_max_bytes,
                record_size: args.record_size,
                records_max: if args.mode == Mode::Consume {
                    args.records
                } else {
                    None
                },
                e2e: args.mode == Mode::E2e,
                isolation_level: args.read_committed as i8,
            };
            tasks.spawn(consume::run(cfg, shared.clone()));
        }
    }
    if args.mode == Mode::Txn {
        let compression = args.compression.compression();
        let run_id = std::process::id();
        let groups = deal_producers(&parts, args.producers);
        let connections = groups.len();
        let schedule_start = Instant::now();
        for (i, mine) in groups.into_iter().enumerate() {
            let cfg = txn::TxnConfig {
                addr: args.bootstrap.clone(),
                transactional_id: format!("{}-txn-{run_id}-{i}", args.topic),
                parts: mine,
                record_size: args.record_size,
                batch_records: args.batch_records,
                compression,
                batches: args.txn_batches.max(1),
                timeout_ms: args.txn_timeout_ms,
                rate: args.rate / connections as f64,
                phase: i as f64 / connections as f64,
                schedule_start,
            };
            tasks.spawn(txn::run(cfg, shared.clone()));
        }
    } else if args.mode != Mode::Consume {
        let groups = deal_producers(&parts, args.producers);
        let per_conn = args.rate / groups.len() as f64;
        let sent = Arc::new(AtomicU64::new(0));
        let compression = args.compression.compression();
        let connections = groups.len();
        let schedule_start = Instant::now();
        for (i, mine) in groups.into_iter().enumerate() {
            let cfg = produce::ProducerConfig {
                addr: args.bootstrap.clone(),
                parts: mine,
                record_size: args.record_size,
                batch_records: args.batch_records,
                keyed: args.keyed,
                compression,
                acks: args.acks,
                in_flight: args.in_flight,
                rate: per_conn,
                phase: i as f64 / connections as f64,
                schedule_start,
                records_max: if args.mode == Mode::Produce {
                    args.records
                } else {
                    None
                },
            };
            tasks.spawn(produce::run(cfg, pshared.clone(), sent.clone()));
        }
    }

    let broker = (!args.broker_pid.is_empty()).then(|| Broker::new(args.broker_pid.clone()));
    let warmup = Duration::from_secs_f64(args.warmup);
    let begun = Instant::now();
    let mut measured_from: Option<(Instant, Option<BrokerSample>, Option<Metrics>)> = None;
    let mut rss_series: Vec<u64> = Vec::new();
    let mut last = (Instant::now(), 0u64);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut failure: Option<anyhow::Error> = None;
    let start_measuring = |shared: &Shared| -> Result<_> {
        let b = broker.as_ref().map(Broker::sample).transpose()?;
        let m = args.metrics_url.as_deref().map(stats::scrape).transpose()?;
        shared.measuring.store(true, Ordering::Relaxed);
        Ok((Instant::now(), b, m))
    };
    if warmup.is_zero() {
        measured_from = Some(start_measuring(&shared)?);
    }
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            done = tasks.join_next() => match done {
                None => break,
                // With --records each connection stops by itself once the
                // shared budget is spent.
                Some(Ok(Ok(()))) => continue,
                Some(Ok(Err(e))) => { failure = Some(e); shared.stop.store(true, Ordering::Relaxed); continue; }
                Some(Err(e)) => { failure = Some(e.into()); shared.stop.store(true, Ordering::Relaxed); continue; }
            },
        }
        if measured_from.is_none() && begun.elapsed() >= warmup {
            measured_from = Some(start_measuring(&shared)?);
        }
        let sample = broker.as_ref().map(Broker::sample).transpose()?;
        if let Some(s) = &sample {
            rss_series.push(s.rss_kib);
        }
        let total = shared.records_total.load(Ordering::Relaxed);
        let rate = (total - last.1) as f64 / last.0.elapsed().as_secs_f64();
        last = (Instant::now(), total);
        let p99 = shared
            .latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .value_at_quantile(0.99);
        println!(
            "[{:>5.0}s] {:>10.0} rec/s {:>8.1} MiB/s  p99 {:>8.2} ms  total {:>11}  errors {}{}{}",
            begun.elapsed().as_secs_f64(),
            rate,
            rate * args.record_size as f64 / 1048576.0,
            p99 as f64 / 1000.0,
            total,
            shared.errors.load(Ordering::Relaxed),
            sample.map_or(String::new(), |s| format!("  rss {} MiB", s.rss_kib / 1024)),
            if measured_from.is_none() {
                "  (warmup)"
            } else {
                ""
            },
        );
        if let (Some(d), Some((from, ..))) = (duration, &measured_from) {
            if from.elapsed() >= d {
                shared.stop.store(true, Ordering::Relaxed);
            }
        }
    }
    if let Some(e) = failure {
        return Err(e.context("a connection failed"));
    }
    let Some((from, b0, m0)) = measured_from else {
        bail!("the run ended during the warmup");
    };
    let seconds = from.elapsed().as_secs_f64();
    let b1 = broker.as_ref().map(Broker::sample).transpose()?;
    let m1 = args.metrics_url.as_deref().map(stats::scrape).transpose()?;
    let mut result = summarize(
        &args,
        &topics,
        &shared,
        seconds,
        (b0, b1, &rss_series),
        (m0, m1),
    )?;
    if args.mode == Mode::E2e {
        // The producers' own acks, beside the end-to-end figures.
        result["produced_records"] = json!(pshared.records.load(Ordering::Relaxed));
        result["produce_errors"] = json!(pshared.errors.load(Ordering::Relaxed));
        result["produce_ack_latency_ms"] = latency_json(&pshared.latency);
    }
    print_summary(&result);
    if !args.no_out {
        let path = args.out.clone().unwrap_or_else(|| {
            format!(
                "{}/results/raw/{}-{}-{:?}.json",
                env!("CARGO_MANIFEST_DIR"),
                utc_stamp(),
                args.label,
                args.mode
            )
            .to_lowercase()
        });
        if let Some(dir) = std::path::Path::new(&path).parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("write {path}"))?;
        println!("result: {path}");
    }
    Ok(())
}

type Metrics = std::collections::BTreeMap<String, f64>;

fn summarize(
    args: &Args,
    topics: &[String],
    shared: &Shared,
    seconds: f64,
    (b0, b1, rss): (Option<BrokerSample>, Option<BrokerSample>, &[u64]),
    (m0, m1): (Option<Metrics>, Option<Metrics>),
) -> Result<Value> {
    let records = shared.records.load(Ordering::Relaxed);
    let bytes = shared.bytes.load(Ordering::Relaxed);
    let mib_s = bytes as f64 / 1048576.0 / seconds;
    let latency = latency_json(&shared.latency);
    let broker = match (b0, b1) {
        (Some(a), Some(b)) => {
            let by_pid: serde_json::Map<String, Value> = args
                .broker_pid
                .iter()
                .zip(a.cpu.iter().zip(&b.cpu))
                .map(|(pid, (x, y))| (pid.to_string(), json!(y - x)))
                .collect();
            let cpu: f64 = b.cpu.iter().sum::<f64>() - a.cpu.iter().sum::<f64>();
            let first = b.cpu[0] - a.cpu[0];
            json!({
                "pids": args.broker_pid,
                "cpu_seconds": cpu,
                "cpu_seconds_by_pid": by_pid,
                "cores_busy": cpu / seconds,
                "mib_per_cpu_second": if cpu > 0.0 { bytes as f64 / 1048576.0 / cpu } else { 0.0 },
                "mib_per_cpu_second_first_pid": if first > 0.0 { bytes as f64 / 1048576.0 / first } else { 0.0 },
                "rss_start_kib": a.rss_kib,
                "rss_end_kib": b.rss_kib,
                "rss_max_kib": rss.iter().copied().max().unwrap_or(b.rss_kib),
                "rss_series_kib": rss,
            })
        }
        _ => Value::Null,
    };
    let metrics = match (m0, m1) {
        (Some(a), Some(b)) => {
            let d = |k: &str| b.get(k).copied().unwrap_or(0.0) - a.get(k).copied().unwrap_or(0.0);
            // a / b over the run, 0 when nothing happened.
            let per = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
            let windows = d("committed_windows");
            let mut m = serde_json::Map::new();
            for k in b.keys() {
                m.insert(k.clone(), json!(d(k)));
            }
            for (name, num, den) in [
                ("puts_per_window", "object_puts", windows),
                ("transactions_per_window", "commit_transactions", windows),
                (
                    "spans_per_transaction",
                    "committed_spans",
                    d("commit_transactions"),
                ),
            ] {
                m.insert(name.into(), json!(per(d(num), den)));
            }
            let stage_windows = d("windows");
            for stage in ["queued", "gather", "upload", "commit"] {
                let us = d(&format!("window_{stage}_microseconds"));
                m.insert(
                    format!("window_{stage}_ms_mean"),
                    json!(per(us, stage_windows) / 1000.0),
                );
            }
            m.insert(
                "shard_buffers_per_window".into(),
                json!(if windows > 0.0 {
                    d("sealed_buffers") / windows
                } else {
                    0.0
                }),
            );
            Value::Object(m)
        }
        _ => Value::Null,
    };
    Ok(json!({
        "mode": format!("{:?}", args.mode).to_lowercase(),
        "label": args.label,
        "time_utc": utc_stamp(),
        "workload": {
            "bootstrap": args.bootstrap, "topics": topics, "partitions": args.partitions,
            "record_size": args.record_size, "batch_records": args.batch_records, "keyed": args.keyed,
            "producers": args.producers, "in_flight": args.in_flight, "rate": args.rate,
            "duration": args.duration, "records": args.records, "warmup": args.warmup,
            "acks": args.acks, "compression": format!("{:?}", args.compression).to_lowercase(),
            "consumers": args.consumers, "fanout": args.fanout, "from": args.from.map(|f| format!("{f:?}").to_lowercase()),
        },
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "git": git_rev(),
        "machine": machine(),
        "records": records,
        "records_total": shared.records_total.load(Ordering::Relaxed),
        "bytes": bytes,
        "seconds": seconds,
        "records_per_sec": records as f64 / seconds,
        "mib_per_sec": mib_s,
        "requests": shared.requests.load(Ordering::Relaxed),
        "errors": shared.errors.load(Ordering::Relaxed),
        "error_codes": shared.error_codes.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "latency_ms": latency,
        "send_lag_ms": latency_json(&shared.send_lag),
        "broker": broker,
        "metrics": metrics,
    }))
}

/// Percentiles (ms) of a shared latency histogram; null when empty.
fn latency_json(h: &std::sync::Mutex<hdrhistogram::Histogram<u64>>) -> Value {
    stats::histogram_json(&h.lock().unwrap_or_else(|e| e.into_inner()))
}

fn print_summary(r: &Value) {
    println!();
    println!("{:<28} {}", "mode", r["mode"].as_str().unwrap_or(""));
    println!("{:<28} {}", "label", r["label"].as_str().unwrap_or(""));
    println!(
        "{:<28} {:.1}",
        "seconds measured",
        r["seconds"].as_f64().unwrap_or(0.0)
    );
    println!("{:<28} {}", "records", r["records"]);
    println!(
        "{:<28} {:.0}",
        "records/s",
        r["records_per_sec"].as_f64().unwrap_or(0.0)
    );
    println!(
        "{:<28} {:.1}",
        "MiB/s",
        r["mib_per_sec"].as_f64().unwrap_or(0.0)
    );
    println!("{:<28} {} {}", "errors", r["errors"], r["error_codes"]);
    if let Some(l) = r["latency_ms"].as_object() {
        for k in ["p50", "p99", "p999", "max"] {
            println!(
                "{:<28} {:.2}",
                format!("latency {k} (ms)"),
                l[k].as_f64().unwrap_or(0.0)
            );
        }
    }
    if let Some(l) = r["send_lag_ms"].as_object() {
        for k in ["p50", "p99"] {
            println!(
                "{:<28} {:.2}",
                format!("send lag {k} (ms)"),
                l[k].as_f64().unwrap_or(0.0)
            );
        }
    }
    if let Some(l) = r["produce_ack_latency_ms"].as_object() {
        for k in ["p50", "p99", "p999"] {
            println!(
                "{:<28} {:.2}",
                format!("produce ack {k} (ms)"),
                l[k].as_f64().unwrap_or(0.0)
            );
        }
    }
    if let Some(b) = r["broker"].as_object() {
        println!(
            "{:<28} {:.2}",
            "broker CPU s",
            b["cpu_seconds"].as_f64().unwrap_or(0.0)
        );
        println!(
            "{:<28} {:.1}",
            "MiB per broker CPU s",
            b["mib_per_cpu_second"].as_f64().unwrap_or(0.0)
        );
        println!(
            "{:<28} {} / {} / {}",
            "broker RSS start/end/max MiB",
            b["rss_start_kib"].as_u64().unwrap_or(0) / 1024,
            b["rss_end_kib"].as_u64().unwrap_or(0) / 1024,
            b["rss_max_kib"].as_u64().unwrap_or(0) / 1024
        );
    }
    if let Some(m) = r["metrics"].as_object() {
        for k in [
            "committed_windows",
            "object_puts",
            "commit_transactions",
            "puts_per_window",
            "transactions_per_window",
            "shard_buffers_per_window",
        ] {
            if let Some(v) = m.get(k).and_then(Value::as_f64) {
                println!("{:<28} {:.3}", k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producers_share_partitions_only_when_they_outnumber_them() {
        assert_eq!(
            deal_producers(&[0, 1, 2, 3], 2),
            vec![vec![0, 2], vec![1, 3]]
        );
        assert_eq!(
            deal_producers(&[0, 1], 5),
            vec![vec![0], vec![1], vec![0], vec![1], vec![0]]
        );
        assert_eq!(deal(&[0, 1], 5), vec![vec![0], vec![1]]);
    }
}
