//! `rutomq produce` and `rutomq consume`: records from and to a terminal
//! or a pipe, one per line, as text or JSON.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use bytes::{Buf, Bytes};
use clap::Args;
use datum_mq::batch::Record;
use datum_mq::{
    Acks, AutoOffsetReset, Compression, KafkaConsumerSettings, KafkaProducer, KafkaProducerBackend,
    KafkaProducerSettings, KafkaSource, ProducerRecord,
};
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Map, Value};

use super::topic::{find_topic, list_offsets};
use super::{check, key_value, Client, ConnArgs, Format};

const FETCH: (i16, i16) = (4, 12);
/// Records sent and not yet acknowledged: bounds the memory of a produce
/// from a large file while keeping many batches in flight.
const PRODUCE_IN_FLIGHT_MAX: usize = 10_000;
/// Kafka's OFFSET_OUT_OF_RANGE.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Kafka's NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// Pause before asking for the leaders again after a failed fetch.
const LEADER_RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// The longest input line (a record with its key): a longer one is refused,
/// not buffered.
const LINE_BYTES_MAX: usize = 16 << 20;
/// Input lines read ahead of the producer.
const LINES_QUEUED_MAX: usize = 1024;

#[derive(Args, Debug)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The topic to write to.
    pub topic: String,
    /// Split each text line at the first DELIM into key and value.
    #[arg(long)]
    pub key_delimiter: Option<String>,
    /// The key of every record (text lines).
    #[arg(short, long, conflicts_with = "key_delimiter")]
    pub key: Option<String>,
    /// A header on every record, NAME=VALUE (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Write to this partition (default: by key, or spread).
    #[arg(short, long)]
    pub partition: Option<i32>,
    /// none, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// all or 1 (rutomq acknowledges durable data either way).
    #[arg(long, default_value = "all")]
    pub acks: String,
}

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The topic to read.
    pub topic: String,
    /// Read as this consumer group (its committed offsets, committing what
    /// was printed); without it, read the partitions directly.
    #[arg(short, long)]
    pub group: Option<String>,
    /// Where to start without a committed offset: start, end, or an offset.
    #[arg(short, long, default_value = "start", allow_hyphen_values = true)]
    pub offset: String,
    /// Only these partitions, comma-separated (not with --group).
    #[arg(short, long, value_delimiter = ',', conflicts_with = "group")]
    pub partitions: Vec<i32>,
    /// Stop after this many records.
    #[arg(short, long)]
    pub num: Option<u64>,
    /// Stop at the end of each partition as it was when the command
    /// started (not with --group).
    #[arg(short, long, conflicts_with = "group")]
    pub exit_at_end: bool,
    /// Print each record's key before its value, separated by DELIM
    /// (text format).
    #[arg(long)]
    pub key_delimiter: Option<String>,
}

fn producer_settings(a: &ProduceArgs) -> Result<KafkaProducerSettings> {
    let compression = match a.compression.as_str() {
        "none" => Compression::None,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => bail!("--compression {other}: expected none, lz4 or zstd"),
    };
    let acks = match a.acks.as_str() {
        "all" | "-1" => Acks::All,
        "1" => Acks::Leader,
        other => bail!("--acks {other}: expected all or 1"),
    };
    Ok(KafkaProducerSettings::new(a.conn.brokers.clone())
        .with_backend(KafkaProducerBackend::Native)
        .with_client_id(super::CLIENT_ID)
        .with_security(a.conn.security()?)
        .with_request_timeout(Duration::from_millis(a.conn.timeout_ms.max(1)))
        .with_compression(compression)
        .with_acks(acks))
}

/// One input line (without its end of line) as a record. Text lines are
/// bytes, not necessarily UTF-8.
fn parse_line(
    a: &ProduceArgs,
    headers: &[(String, Option<Bytes>)],
    line: Vec<u8>,
) -> Result<ProducerRecord> {
    let mut r = ProducerRecord::new(a.topic.clone());
    r.partition = a.partition;
    r.headers = headers.to_vec();
    match a.conn.format {
        Format::Table => {
            let mut line = Bytes::from(line);
            r.key = match (&a.key_delimiter, &a.key) {
                (Some(d), _) => {
                    let d = d.as_bytes();
                    let at = line
                        .windows(d.len().max(1))
                        .position(|w| w == d)
                        .ok_or_else(|| {
                            anyhow!(
                                "no key delimiter {:?} in the line",
                                a.key_delimiter.as_deref().unwrap_or_default()
                            )
                        })?;
                    let key = line.split_to(at);
                    line.advance(d.len());
                    Some(key)
                }
                (None, Some(k)) => Some(Bytes::copy_from_slice(k.as_bytes())),
                (None, None) => None,
            };
            r.value = Some(line);
        }
        Format::Json => {
            let v: Value = serde_json::from_slice(&line).context("not a JSON object")?;
            let obj = v.as_object().ok_or_else(|| anyhow!("not a JSON object"))?;
            r.key = bytes_field(obj, "key")?
                .or(a.key.as_ref().map(|k| Bytes::copy_from_slice(k.as_bytes())));
            r.value = bytes_field(obj, "value")?;
            if let Some(p) = obj.get("partition").filter(|p| !p.is_null()) {
                let p = p.as_i64().and_then(|p| i32::try_from(p).ok());
                r.partition =
                    Some(p.ok_or_else(|| anyhow!("\"partition\" is not a partition number"))?);
            }
            if let Some(ts) = obj.get("timestamp").filter(|t| !t.is_null()) {
                r.timestamp_ms = Some(
                    ts.as_i64()
                        .ok_or_else(|| anyhow!("\"timestamp\" is not milliseconds"))?,
                );
            }
            // [[name, value], ...] as consume prints them (Kafka allows a
            // name twice, and keeps their order), or {"name": value}.
            let pairs: Vec<(&str, &Value)> = match obj.get("headers") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(h)) => h.iter().map(|(k, v)| (k.as_str(), v)).collect(),
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|pair| match pair.as_array().map(Vec::as_slice) {
                        Some([Value::String(k), v]) => Ok((k.as_str(), v)),
                        _ => Err(anyhow!("a header is not [name, value]")),
                    })
                    .collect::<Result<_>>()?,
                Some(_) => bail!("\"headers\" is not a list of [name, value]"),
            };
            for (k, v) in pairs {
                let v = match v {
                    Value::Null => None,
                    Value::String(s) => Some(Bytes::copy_from_slice(s.as_bytes())),
                    _ => bail!("header {k:?}: value is not a string or null"),
                };
                r.headers.push((k.to_owned(), v));
            }
        }
    }
    Ok(r)
}

/// A key or value from JSON: a string (its UTF-8), null, or
/// {"base64": "..."} for bytes that are not text.
fn bytes_field(obj: &Map<String, Value>, name: &str) -> Result<Option<Bytes>> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(Bytes::copy_from_slice(s.as_bytes()))),
        Some(Value::Object(o)) => match o.get("base64").and_then(Value::as_str) {
            Some(b) => Ok(Some(Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .with_context(|| format!("\"{name}\": bad base64"))?,
            ))),
            None => bail!("\"{name}\": expected a string, null or {{\"base64\": ...}}"),
        },
        Some(_) => bail!("\"{name}\": expected a string, null or {{\"base64\": ...}}"),
    }
}

/// The JSON form of bytes: a string when they are UTF-8.
fn bytes_json(b: Option<&Bytes>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => json!(s),
            Err(_) => json!({ "base64": base64::engine::general_purpose::STANDARD.encode(b) }),
        },
    }
}

/// Reads standard input line by line on its own thread (a blocking read
/// must not hold up the connections' tasks: a line typed, or one from
/// `tail -f`, goes out at once), handing each to the producer.
fn read_lines(tx: tokio::sync::mpsc::Sender<Result<Vec<u8>>>) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        let mut line = Vec::new();
        let read = (&mut input)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut line);
        let item = match read {
            Ok(0) => return,
            Ok(_) if line.last() == Some(&b'\n') => {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Ok(line)
            }
            Ok(_) if line.len() > LINE_BYTES_MAX => {
                Err(anyhow!("longer than {LINE_BYTES_MAX} bytes"))
            }
            Ok(_) => Ok(line),
            Err(e) => Err(anyhow!(e).context("reading standard input")),
        };
        let last = item.is_err();
        if tx.blocking_send(item).is_err() || last {
            return;
        }
    }
}

pub async fn produce(a: ProduceArgs) -> Result<()> {
    let headers = a
        .headers
        .iter()
        .map(|h| key_value(h, "--header").map(|(k, v)| (k, Some(Bytes::from(v)))))
        .collect::<Result<Vec<_>>>()?;
    let producer = KafkaProducer::new(producer_settings(&a)?).await?;
    let (tx, mut lines) = tokio::sync::mpsc::channel(LINES_QUEUED_MAX);
    // A plain thread: a blocking task would keep the runtime from ending
    // while standard input stays open.
    std::thread::spawn(move || read_lines(tx));
    let mut in_flight: FuturesUnordered<datum_mq::Delivery> = FuturesUnordered::new();
    let mut acked = 0u64;
    let mut partitions = BTreeMap::<i32, u64>::new();
    let mut number = 0u64;
    let mut input_done = false;
    while !(input_done && in_flight.is_empty()) {
        tokio::select! {
            biased;
            Some(d) = in_flight.next(), if !in_flight.is_empty() => {
                let m = d.with_context(|| format!("producing to {}", a.topic))?;
                *partitions.entry(m.partition).or_default() += 1;
                acked += 1;
            }
            line = lines.recv(), if !input_done && in_flight.len() < PRODUCE_IN_FLIGHT_MAX => match line {
                None => {
                    input_done = true;
                    producer.flush().await?;
                }
                Some(line) => {
                    number += 1;
                    let record = line
                        .and_then(|l| parse_line(&a, &headers, l))
                        .with_context(|| format!("input line {number}"))?;
                    in_flight.push(producer.send(record).await?);
                }
            },
        }
    }
    let mut out = std::io::stdout().lock();
    match a.conn.format {
        Format::Json => {
            let _ = writeln!(
                out,
                "{}",
                json!({"topic": a.topic, "records": acked, "partitions": partitions})
            );
        }
        Format::Table => {
            let spread: Vec<String> = partitions.iter().map(|(p, n)| format!("{p}:{n}")).collect();
            eprintln!(
                "produced {acked} records to {} (partition:records {})",
                a.topic,
                spread.join(" ")
            );
        }
    }
    Ok(())
}

/// Prints records as they come; counts them against --num.
struct Printer<'a> {
    format: Format,
    key_delimiter: Option<&'a str>,
    out: std::io::StdoutLock<'static>,
    printed: u64,
    limit: u64,
}

impl Printer<'_> {
    fn print(&mut self, topic: &str, partition: i32, r: &Record) -> Result<()> {
        let (key, value) = (r.key.as_ref(), r.value.as_ref());
        match self.format {
            Format::Json => {
                let h: Vec<Value> = r
                    .headers
                    .iter()
                    .map(|(k, v)| json!([k, bytes_json(v.as_ref())]))
                    .collect();
                let line = json!({
                    "topic": topic, "partition": partition, "offset": r.offset,
                    "timestamp": r.timestamp_ms, "key": bytes_json(key),
                    "value": bytes_json(value), "headers": h,
                });
                writeln!(self.out, "{line}")?;
            }
            Format::Table => {
                if let Some(d) = self.key_delimiter {
                    self.out
                        .write_all(key.map(|k| &k[..]).unwrap_or_default())?;
                    self.out.write_all(d.as_bytes())?;
                }
                self.out
                    .write_all(value.map(|v| &v[..]).unwrap_or_default())?;
                self.out.write_all(b"\n")?;
            }
        }
        self.printed += 1;
        Ok(())
    }

    fn done(&self) -> bool {
        self.printed >= self.limit
    }
}

pub async fn consume(c: &Client, a: ConsumeArgs) -> Result<()> {
    let mut printer = Printer {
        format: a.conn.format,
        key_delimiter: a.key_delimiter.as_deref(),
        out: std::io::stdout().lock(),
        printed: 0,
        limit: a.num.unwrap_or(u64::MAX),
    };
    let result = match &a.group {
        Some(g) => consume_group(&a, g, &mut printer).await,
        None => consume_partitions(c, &a, &mut printer).await,
    };
    let result = result.and_then(|()| Ok(printer.out.flush()?));
    // The reader went away (`| head`): it has what it wanted.
    match result {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Ctrl-C or SIGTERM: a consume stops cleanly (a group member commits and
/// leaves its group).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// As a member of a consumer group: its committed offsets, and it commits
/// what was printed.
async fn consume_group(a: &ConsumeArgs, group: &str, printer: &mut Printer<'_>) -> Result<()> {
    let reset = match a.offset.as_str() {
        "start" => AutoOffsetReset::Earliest,
        "end" => AutoOffsetReset::Latest,
        other => bail!("--offset {other} with --group: expected start or end (move a group's offsets with `rutomq group reset-offsets`)"),
    };
    let mut settings = KafkaConsumerSettings::new(a.conn.brokers.clone(), group)
        .with_client_id(super::CLIENT_ID)
        .with_security(a.conn.security()?)
        .with_auto_offset_reset(reset);
    settings.request_timeout = Duration::from_millis(a.conn.timeout_ms.max(1));
    let mut source = KafkaSource::new(settings, &[a.topic.as_str()]).await?;
    let mut failure = None;
    let stop = stop_signal();
    tokio::pin!(stop);
    while !printer.done() {
        let next = tokio::select! {
            n = source.next() => n,
            _ = &mut stop => break,
        };
        match next {
            None => break,
            Some(Err(e)) => {
                failure = Some(anyhow!(e));
                break;
            }
            Some(Ok((r, ack))) => {
                let record = Record {
                    offset: r.offset,
                    timestamp_ms: r.timestamp_ms,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                };
                if let Err(e) = printer.print(&r.topic, r.partition, &record) {
                    failure = Some(e);
                    break;
                }
                ack.ack();
            }
        }
    }
    // Commits what was printed and leaves the group, even after a failure.
    let closed = source.close().await;
    failure.map_or(Ok(()), Err)?;
    Ok(closed?)
}

/// Reads partitions directly, from their leaders.
async fn consume_partitions(c: &Client, a: &ConsumeArgs, printer: &mut Printer<'_>) -> Result<()> {
    let md = c.metadata(Some(std::slice::from_ref(&a.topic))).await?;
    let t = find_topic(&md, &a.topic)?;
    let mut parts: Vec<(String, i32)> = t
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .filter(|p| a.partitions.is_empty() || a.partitions.contains(p))
        .map(|p| (a.topic.clone(), p))
        .collect();
    parts.sort();
    if let Some(p) = a
        .partitions
        .iter()
        .find(|p| !parts.iter().any(|(_, q)| q == *p))
    {
        bail!("{} has no partition {p}", a.topic);
    }
    let mut cluster = super::cluster_of(&md);
    let starts = list_offsets(c, &cluster, &parts, -2).await?;
    let ends = list_offsets(c, &cluster, &parts, -1).await?;
    let bounds = |k: &(String, i32)| -> Result<(i64, i64)> {
        match (starts.get(k), ends.get(k)) {
            (Some(&s), Some(&e)) => Ok((s, e.max(s))),
            _ => bail!("no offsets for {}-{}", k.0, k.1),
        }
    };
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    let mut stop_at: BTreeMap<i32, i64> = BTreeMap::new();
    for k in &parts {
        let (start, end) = bounds(k)?;
        let pos = match a.offset.as_str() {
            "start" => start,
            "end" => end,
            n => n
                .parse::<i64>()
                .map_err(|_| anyhow!("--offset {n}: expected start, end or an offset"))?
                .clamp(start, end),
        };
        positions.insert(k.1, pos);
        stop_at.insert(k.1, end);
    }
    let topic_id = t.topic_id;
    // Since when fetching has failed (an agent restarting, a leader
    // moving): retried with fresh metadata until --timeout-ms.
    let mut failing_since: Option<std::time::Instant> = None;
    let patience = Duration::from_millis(a.conn.timeout_ms.max(1));
    let at_end = |positions: &BTreeMap<i32, i64>| {
        a.exit_at_end && positions.iter().all(|(p, pos)| *pos >= stop_at[p])
    };
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut batch = Vec::new();
    while !printer.done() && !at_end(&positions) {
        let mut by_leader: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for p in positions.keys() {
            let leader = cluster
                .leader_addr(&a.topic, *p)
                .unwrap_or(c.conn().broker());
            by_leader.entry(leader.to_owned()).or_default().push(*p);
        }
        let mut refresh = false;
        let wait = if by_leader.len() > 1 { 100 } else { 500 };
        for (leader, ps) in by_leader {
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(wait)
                .with_min_bytes(1)
                .with_max_bytes(16 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(a.topic.clone())))
                    .with_topic_id(topic_id)
                    .with_partitions(
                        ps.iter()
                            .map(|p| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_current_leader_epoch(-1)
                                    .with_fetch_offset(positions.get(p).copied().unwrap_or(0))
                                    .with_log_start_offset(-1)
                                    .with_partition_max_bytes(1 << 20)
                            })
                            .collect(),
                    )]);
            let fetched = async {
                let conn = c.to(&leader).await?;
                let resp = conn.call(&req, FETCH).await?;
                check(resp.error_code, None, || format!("fetching {}", a.topic))?;
                anyhow::Ok(resp)
            };
            let resp = tokio::select! {
                r = fetched => r,
                _ = &mut stop => return Ok(()),
            };
            let resp = match resp {
                Ok(r) => r,
                Err(e) => {
                    let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= patience {
                        return Err(
                            e.context(format!("no agent served {} for {patience:?}", a.topic))
                        );
                    }
                    tracing::warn!(agent = %leader, error = %format!("{e:#}"), "fetch failed; asking for the leaders again");
                    refresh = true;
                    break;
                }
            };
            failing_since = None;
            for topic in resp.responses {
                for p in topic.partitions {
                    let Some(pos) = positions.get_mut(&p.partition_index) else {
                        continue; // not asked for
                    };
                    if p.error_code == OFFSET_OUT_OF_RANGE {
                        // Retention (or DeleteRecords) passed us, or the log
                        // was cut below us: go on from the nearest offset the
                        // log has, as Kafka's consumers do with a reset.
                        let k = (a.topic.clone(), p.partition_index);
                        let one = std::slice::from_ref(&k);
                        let start = list_offsets(c, &cluster, one, -2).await?;
                        let end = list_offsets(c, &cluster, one, -1).await?;
                        let (Some(&start), Some(&end)) = (start.get(&k), end.get(&k)) else {
                            bail!("no offsets for {}-{}", k.0, k.1);
                        };
                        let to = (*pos).clamp(start, end.max(start));
                        tracing::warn!(
                            partition = p.partition_index,
                            offset = *pos,
                            to,
                            "offset out of range; going on from the nearest offset in the log"
                        );
                        *pos = to;
                        continue;
                    }
                    if p.error_code == NOT_LEADER_OR_FOLLOWER {
                        refresh = true;
                        continue;
                    }
                    check(p.error_code, None, || {
                        format!("fetching {}-{}", a.topic, p.partition_index)
                    })?;
                    let Some(data) = p.records else { continue };
                    batch.clear();
                    let next = datum_mq::batch::decode_batches(data, *pos, &mut batch)
                        .with_context(|| format!("records of {}-{}", a.topic, p.partition_index))?;
                    for r in &batch {
                        if printer.done() {
                            break;
                        }
                        printer.print(&a.topic, p.partition_index, r)?;
                    }
                    if let Some(next) = next {
                        *pos = next.max(*pos);
                    }
                }
            }
        }
        if refresh {
            tokio::select! {
                _ = tokio::time::sleep(LEADER_RETRY_BACKOFF) => {}
                _ = &mut stop => return Ok(()),
            }
            // Any agent that answers: the bootstrap one may be the one gone.
            match c.metadata_any(std::slice::from_ref(&a.topic)).await {
                Ok(fresh) => {
                    cluster.apply(fresh);
                }
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "metadata refresh failed"),
            }
        }
    }
    Ok(())
}
