//! The native producer: one task owns the batches, the cluster view and the
//! connections; `send` hands it records over a bounded channel.
//!
//! Ordering and retries (the rules this file keeps):
//! - A partition has at most one batch in flight: its requests never
//!   overlap, so its batches land in the order they were closed.
//! - Per broker at most `max_in_flight_requests_per_connection` Produce
//!   requests are in flight (default 1: one request carries the ready
//!   batches of every partition that broker leads).
//! - After a failed request or a retriable partition error the broker's
//!   pipeline is halted: nothing new is issued until every response
//!   already issued has settled. Then the failed batches are retried, in
//!   the order they were first issued, one request at a time, before any
//!   newer batch is issued.
//! - A batch is retried at most `retries` times and never past its
//!   records' delivery timeout; then its records fail with the last error.
//!   Retries give at-least-once delivery, not idempotence.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataResponse, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use super::conn::Connection;
use super::{bootstrap_addrs, connect, fetch_metadata, Cluster};
use crate::batch::{BatchBuilder, ProducerIds};
use crate::error::{Error, Result};
use crate::partitioner::{partition_for_key, Sticky};
use crate::record::{ProducerRecord, RecordMetadata};
use crate::settings::KafkaProducerSettings;

/// Produce versions used (v13 names topics by id).
const PRODUCE_VERSIONS: (i16, i16) = (3, 12);
/// Records queued towards the producer task.
pub const SEND_QUEUE_MAX: usize = 4096;
/// Bytes a record costs beyond its key, value and headers (batch framing).
const RECORD_OVERHEAD_BYTES: usize = 64;
/// Topics waiting for metadata are asked for again after this.
const METADATA_RETRY: Duration = Duration::from_millis(100);
/// Commands taken from the queue in one go at most.
const DRAIN_MAX: usize = 1024;
/// The producer re-reads the metadata of its topics this often.
const METADATA_MAX_AGE: Duration = Duration::from_secs(300);

type Reply = oneshot::Sender<Result<RecordMetadata>>;

enum Cmd {
    Record(Box<Queued>),
    Flush(oneshot::Sender<()>),
}

struct Queued {
    record: ProducerRecord,
    permit: OwnedSemaphorePermit,
    reply: Reply,
    enqueued: Instant,
}

/// Handle to the producer task; cheap to clone.
#[derive(Clone)]
pub struct NativeProducer {
    tx: mpsc::Sender<Cmd>,
    memory: Arc<Semaphore>,
    settings: Arc<KafkaProducerSettings>,
}

impl NativeProducer {
    /// Checks the settings, reads the cluster from a bootstrap server and
    /// starts the producer task (on the current tokio runtime).
    pub async fn start(settings: KafkaProducerSettings) -> Result<NativeProducer> {
        settings.validate()?;
        settings.security.validate()?;
        let settings = Arc::new(settings);
        let mut task = Task::new(settings.clone())?;
        task.metadata().await?;
        let (tx, rx) = mpsc::channel(SEND_QUEUE_MAX);
        tokio::spawn(task.run(rx));
        Ok(NativeProducer {
            tx,
            memory: Arc::new(Semaphore::new(settings.buffer_memory_bytes)),
            settings,
        })
    }

    /// Queues `record`; waits while `buffer_memory_bytes` are in use. The
    /// receiver answers once the record's batch was confirmed (or failed).
    pub async fn send(
        &self,
        record: ProducerRecord,
    ) -> Result<oneshot::Receiver<Result<RecordMetadata>>> {
        let size = record_bytes(&record);
        if size > self.settings.max_request_size_bytes {
            return Err(Error::kafka(
                10,
                format!(
                    "a record of {size} bytes is larger than max_request_size_bytes {}",
                    self.settings.max_request_size_bytes
                ),
            ));
        }
        let permit = self
            .memory
            .clone()
            .acquire_many_owned(size as u32)
            .await
            .map_err(|_| Error::Closed)?;
        let (reply, rx) = oneshot::channel();
        let queued = Box::new(Queued {
            record,
            permit,
            reply,
            enqueued: Instant::now(),
        });
        self.tx
            .send(Cmd::Record(queued))
            .await
            .map_err(|_| Error::Closed)?;
        Ok(rx)
    }

    /// Closes every open batch now and waits until every record sent
    /// before was delivered or failed.
    pub async fn flush(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Flush(tx))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)
    }
}

fn record_bytes(r: &ProducerRecord) -> usize {
    RECORD_OVERHEAD_BYTES
        + r.key.as_ref().map_or(0, Bytes::len)
        + r.value.as_ref().map_or(0, Bytes::len)
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
            .sum::<usize>()
}

type Tp = (Arc<str>, i32);

/// A partition's answer: error code, base offset, log append time, message.
type Answer = (i16, i64, i64, Option<String>);

struct Waiter {
    reply: Reply,
    _permit: OwnedSemaphorePermit,
    timestamp_ms: i64,
    enqueued: Instant,
}

struct Open {
    builder: BatchBuilder,
    waiters: Vec<Waiter>,
    opened: Instant,
    /// When its earliest record was queued.
    oldest: Instant,
}

struct Ready {
    data: Bytes,
    waiters: Vec<Waiter>,
    attempts: u32,
    /// Failed before: goes out before newer batches of its broker.
    retry: bool,
    /// The broker it failed on: that broker's pipeline issues nothing newer
    /// until this batch went out again (even if it now has another leader,
    /// or none yet).
    failed_on: i32,
    not_before: Instant,
    /// Order in which batches were closed (retries go in this order).
    seq: u64,
    /// When its earliest record was queued.
    oldest: Instant,
}

#[derive(Default)]
struct Part {
    open: Option<Open>,
    ready: VecDeque<Ready>,
    in_flight: bool,
}

#[derive(Default)]
struct Pipe {
    in_flight: usize,
    halted: bool,
}

/// What the task waits for besides commands: Produce responses, metadata
/// answers and new connections all complete here, so the task never
/// blocks on one broker while the others could go on.
enum Event {
    Produce {
        node: i32,
        conn: Connection,
        parts: Vec<Tp>,
        result: Result<ProduceResponse>,
    },
    Metadata(Result<MetadataResponse>),
    Connected(i32, Result<Connection>),
}

struct Task {
    s: Arc<KafkaProducerSettings>,
    bootstrap: Vec<String>,
    cluster: Cluster,
    conns: HashMap<i32, Connection>,
    parts: HashMap<Tp, Part>,
    topic_names: HashMap<String, Arc<str>>,
    sticky: HashMap<Arc<str>, Sticky>,
    /// Records of topics without metadata yet.
    unrouted: HashMap<String, Vec<Queued>>,
    metadata_due: bool,
    metadata_not_before: Instant,
    metadata_read: Instant,
    in_flight: FuturesUnordered<BoxFuture<'static, Event>>,
    metadata_in_flight: bool,
    /// Brokers being connected to.
    connecting: std::collections::HashSet<i32>,
    /// Brokers whose last connect failed: not tried again before this.
    connect_not_before: HashMap<i32, Instant>,
    /// Next bootstrap server to ask when no connection is up.
    bootstrap_next: usize,
    pipes: HashMap<i32, Pipe>,
    seq: u64,
    /// Every handle is gone: everything queued goes out now.
    closing: bool,
    /// Flushes waiting, each for the records queued before it was asked.
    flush_waiters: Vec<(Instant, oneshot::Sender<()>)>,
}

impl Task {
    fn new(s: Arc<KafkaProducerSettings>) -> Result<Task> {
        Ok(Task {
            bootstrap: bootstrap_addrs(&s.bootstrap_servers)?,
            s,
            cluster: Cluster::default(),
            conns: HashMap::new(),
            parts: HashMap::new(),
            topic_names: HashMap::new(),
            sticky: HashMap::new(),
            unrouted: HashMap::new(),
            metadata_due: false,
            metadata_not_before: Instant::now(),
            metadata_read: Instant::now(),
            in_flight: FuturesUnordered::new(),
            metadata_in_flight: false,
            connecting: Default::default(),
            connect_not_before: HashMap::new(),
            bootstrap_next: 0,
            pipes: HashMap::new(),
            seq: 0,
            closing: false,
            flush_waiters: Vec::new(),
        })
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut open = true;
        loop {
            let wake = self.next_wake();
            tokio::select! {
                cmd = rx.recv(), if open => match cmd {
                    Some(c) => self.on_cmd(c),
                    // Every handle is gone: deliver what is queued, then end.
                    None => { open = false; self.closing = true; }
                },
                                Some(ev) = self.in_flight.next(), if !self.in_flight.is_empty() => self.on_event(ev),
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
            // Take what else is queued before closing batches.
            // (bounded, so a fast sender cannot hold off the rest)
            if open {
                for _ in 0..DRAIN_MAX {
                    match rx.try_recv() {
                        Ok(c) => self.on_cmd(c),
                        Err(_) => break,
                    }
                }
            }
            self.step().await;
            // Events that completed meanwhile are taken before waiting.
            while let Some(Some(ev)) = futures::FutureExt::now_or_never(self.in_flight.next()) {
                self.on_event(ev);
                self.step().await;
            }
            self.answer_flushes();
            if !open && self.is_idle() {
                return;
            }
        }
    }

    /// Metadata, closing due batches, issuing requests, expiring records.
    async fn step(&mut self) {
        let now = Instant::now();
        if (self.metadata_due
            || !self.unrouted.is_empty()
            || now >= self.metadata_read + METADATA_MAX_AGE)
            && now >= self.metadata_not_before
            && !self.metadata_in_flight
        {
            self.start_metadata();
        }
        self.close_due();
        self.issue().await;
        self.expire();
    }

    /// Asks for the metadata of every topic the producer knows or waits
    /// for, over a live connection, or else a bootstrap server's.
    fn start_metadata(&mut self) {
        let mut topics: Vec<String> = self.cluster.topics.keys().cloned().collect();
        topics.extend(self.unrouted.keys().cloned());
        topics.sort();
        topics.dedup();
        let live = self.conns.values().find(|c| c.is_alive()).cloned();
        let addr = self.bootstrap[self.bootstrap_next % self.bootstrap.len()].clone();
        self.bootstrap_next += 1;
        let s = self.s.clone();
        self.metadata_in_flight = true;
        self.in_flight.push(Box::pin(async move {
            let conn = match live {
                Some(c) => c,
                None => match connect(&addr, &s.security, &s.client_id, s.request_timeout).await {
                    Ok(c) => c,
                    Err(e) => return Event::Metadata(Err(e)),
                },
            };
            Event::Metadata(fetch_metadata(&conn, &topics, true).await)
        }));
    }

    fn is_idle(&self) -> bool {
        self.unrouted.is_empty()
            && self.in_flight.is_empty()
            && self
                .parts
                .values()
                .all(|p| p.open.is_none() && p.ready.is_empty())
    }

    /// The earliest instant something is due: a linger expiry, a retry
    /// backoff, a metadata retry.
    fn next_wake(&self) -> Instant {
        // Only instants still ahead count: what is due now but blocked
        // (a halted pipeline settling) waits for a response instead.
        let now = Instant::now();
        let mut wake = now + Duration::from_secs(1);
        let mut consider = |t: Instant| {
            if t > now {
                wake = wake.min(t);
            }
        };
        if !self.unrouted.is_empty() || self.metadata_due {
            consider(self.metadata_not_before);
        }
        for p in self.parts.values() {
            if let Some(o) = &p.open {
                consider(o.opened + self.s.linger);
            }
            if let Some(r) = p.ready.front() {
                if !p.in_flight {
                    consider(r.not_before);
                }
            }
        }
        wake
    }

    fn on_cmd(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Flush(w) => self.flush_waiters.push((Instant::now(), w)),
            Cmd::Record(q) => self.append(*q),
        }
    }

    /// Reads the cluster from the first bootstrap server that answers
    /// (at start, so that an unreachable cluster fails `start`).
    async fn metadata(&mut self) -> Result<()> {
        let mut last = Error::Closed;
        for addr in self.bootstrap.clone() {
            let conn = match connect(
                &addr,
                &self.s.security,
                &self.s.client_id,
                self.s.request_timeout,
            )
            .await
            {
                Ok(c) => c,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            match fetch_metadata(&conn, &[], true).await {
                Ok(resp) => {
                    self.cluster.apply(resp);
                    self.metadata_read = Instant::now();
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// A topic the broker answered with an error: retriable ones
    /// (auto-creation under way, leader election) wait; others fail its
    /// waiting records.
    fn topic_error(&mut self, topic: &str, code: i16) {
        let retriable = Error::kafka(code, "").is_retriable();
        if retriable {
            return;
        }
        if let Some(waiting) = self.unrouted.remove(topic) {
            for q in waiting {
                let _ = q
                    .reply
                    .send(Err(Error::kafka(code, format!("topic {topic}"))));
            }
        }
    }

    fn route_unrouted(&mut self) {
        let known: Vec<String> = self
            .unrouted
            .keys()
            .filter(|t| self.cluster.topics.contains_key(*t))
            .cloned()
            .collect();
        for t in known {
            for q in self.unrouted.remove(&t).unwrap_or_default() {
                self.append(q);
            }
        }
    }

    fn topic_name(&mut self, t: &str) -> Arc<str> {
        if let Some(a) = self.topic_names.get(t) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(t);
        self.topic_names.insert(t.to_owned(), a.clone());
        a
    }

    /// Puts a record into its partition's open batch.
    fn append(&mut self, q: Queued) {
        let Some(count) = self
            .cluster
            .topics
            .get(&q.record.topic)
            .map(|t| t.leaders.len() as i32)
        else {
            self.unrouted
                .entry(q.record.topic.clone())
                .or_default()
                .push(q);
            self.metadata_due = true;
            return;
        };
        if count == 0 {
            self.unrouted
                .entry(q.record.topic.clone())
                .or_default()
                .push(q);
            return;
        }
        let topic = self.topic_name(&q.record.topic);
        let mut partition = match (q.record.partition, &q.record.key) {
            (Some(p), _) if p >= count => {
                // Maybe the topic grew: wait for fresh metadata (failing at
                // the delivery timeout if it never has that partition).
                self.unrouted
                    .entry(q.record.topic.clone())
                    .or_default()
                    .push(q);
                self.metadata_due = true;
                return;
            }
            (Some(p), _) if p < 0 => {
                let _ = q.reply.send(Err(Error::kafka(
                    3,
                    format!("partition {p} of {topic}, which has {count}"),
                )));
                return;
            }
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, count),
            (None, None) => self
                .sticky
                .entry(topic.clone())
                .or_default()
                .partition(count),
        };
        let keyless = q.record.partition.is_none() && q.record.key.is_none();
        let size = BatchBuilder::record_size(
            q.record.key.as_deref(),
            q.record.value.as_deref(),
            &q.record.headers,
        );
        // A full open batch closes first; keyless records then follow the
        // sticky partition to its next one.
        let full = self
            .parts
            .get(&(topic.clone(), partition))
            .and_then(|p| p.open.as_ref())
            .is_some_and(|o| o.builder.size_bytes() + size > self.s.batch_size_bytes);
        if full {
            self.close((topic.clone(), partition), count);
            if keyless {
                partition = self
                    .sticky
                    .entry(topic.clone())
                    .or_default()
                    .partition(count);
            }
        }
        let tp = (topic, partition);
        let compression = self.s.compression;
        let part = self.parts.entry(tp.clone()).or_default();
        if part.open.is_none() {
            match BatchBuilder::new(compression) {
                Ok(builder) => {
                    part.open = Some(Open {
                        builder,
                        waiters: Vec::new(),
                        opened: Instant::now(),
                        oldest: q.enqueued,
                    })
                }
                Err(e) => {
                    let _ = q.reply.send(Err(e));
                    return;
                }
            }
        }
        let open = part.open.as_mut().expect("opened above");
        open.oldest = open.oldest.min(q.enqueued);
        let timestamp_ms = q.record.timestamp_ms.unwrap_or_else(now_ms);
        open.builder.push(
            timestamp_ms,
            q.record.key.as_deref(),
            q.record.value.as_deref(),
            &q.record.headers,
        );
        open.waiters.push(Waiter {
            reply: q.reply,
            _permit: q.permit,
            timestamp_ms,
            enqueued: q.enqueued,
        });
        if open.builder.size_bytes() >= self.s.batch_size_bytes {
            self.close(tp, count);
        }
    }

    /// Closes `tp`'s open batch into its ready queue.
    fn close(&mut self, tp: Tp, partitions: i32) {
        let Some(part) = self.parts.get_mut(&tp) else {
            return;
        };
        let Some(open) = part.open.take() else {
            return;
        };
        self.seq += 1;
        match open.builder.finish(ProducerIds::NONE) {
            Ok(data) => part.ready.push_back(Ready {
                data,
                waiters: open.waiters,
                attempts: 0,
                retry: false,
                failed_on: -1,
                not_before: Instant::now(),
                seq: self.seq,
                oldest: open.oldest,
            }),
            Err(e) => fail_waiters(open.waiters, &e),
        }
        if let Some(s) = self.sticky.get_mut(&tp.0) {
            s.batch_closed(tp.1, partitions);
        }
    }

    /// Answers the flushes whose records are all delivered or failed.
    fn answer_flushes(&mut self) {
        if self.flush_waiters.is_empty() {
            return;
        }
        let waiters = std::mem::take(&mut self.flush_waiters);
        for (asked, w) in waiters {
            if self.pending_before(asked) {
                self.flush_waiters.push((asked, w));
            } else {
                let _ = w.send(());
            }
        }
    }

    /// Whether a record queued at or before `t` is still undelivered.
    fn pending_before(&self, t: Instant) -> bool {
        self.unrouted.values().flatten().any(|q| q.enqueued <= t)
            || self.parts.values().any(|p| {
                p.open.as_ref().is_some_and(|o| o.oldest <= t)
                    || p.ready.iter().any(|r| r.oldest <= t)
            })
    }

    /// Closes batches whose linger passed, those holding records a flush
    /// waits for, and all of them once closing.
    fn close_due(&mut self) {
        let now = Instant::now();
        let flush_from = self.flush_waiters.iter().map(|w| w.0).max();
        let due: Vec<Tp> = self
            .parts
            .iter()
            .filter(|(_, p)| {
                p.open.as_ref().is_some_and(|o| {
                    self.closing
                        || o.opened + self.s.linger <= now
                        || flush_from.is_some_and(|t| o.oldest <= t)
                })
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in due {
            let count = self
                .cluster
                .topics
                .get(&*tp.0)
                .map_or(1, |t| t.leaders.len() as i32);
            self.close(tp, count);
        }
    }

    fn leader(&self, tp: &Tp) -> i32 {
        self.cluster
            .topics
            .get(&*tp.0)
            .and_then(|t| t.leaders.get(tp.1 as usize).copied())
            .unwrap_or(-1)
    }

    /// Issues Produce requests on every broker pipeline that may.
    async fn issue(&mut self) {
        let now = Instant::now();
        // (seq, partition, retry, due) of every head not in flight.
        let mut by_node: HashMap<i32, Vec<(u64, Tp, bool, bool)>> = HashMap::new();
        for (tp, p) in &self.parts {
            if p.in_flight {
                continue;
            }
            let Some(head) = p.ready.front() else {
                continue;
            };
            let node = self.leader(tp);
            if node < 0 {
                self.metadata_due = true;
                continue;
            }
            by_node.entry(node).or_default().push((
                head.seq,
                tp.clone(),
                head.retry,
                head.not_before <= now,
            ));
        }
        let blocked: std::collections::HashSet<i32> = self
            .parts
            .values()
            .filter(|p| !p.in_flight)
            .filter_map(|p| p.ready.front())
            .filter(|r| r.retry)
            .map(|r| r.failed_on)
            .collect();
        for (node, mut heads) in by_node {
            let pipe = self.pipes.entry(node).or_default();
            if pipe.halted {
                if pipe.in_flight > 0 {
                    continue; // settling what was issued before the failure
                }
                pipe.halted = false;
            }
            // A failed batch still waiting for its backoff holds back the
            // newer ones too.
            let retrying = heads.iter().any(|h| h.2) || blocked.contains(&node);
            heads.retain(|h| h.3 && (h.2 || !retrying));
            if heads.is_empty() {
                continue;
            }
            let Some(conn) = self.connection(node) else {
                continue; // connecting; issued once connected
            };
            heads.sort_by_key(|h| h.0);
            let mut heads = heads.into_iter().peekable();
            while heads.peek().is_some()
                && self.pipes.get(&node).map_or(0, |p| p.in_flight)
                    < self.s.max_in_flight_requests_per_connection
            {
                let mut taken = Vec::new();
                let mut bytes = 0usize;
                while let Some(h) = heads.peek() {
                    let len = self.parts[&h.1].ready.front().map_or(0, |r| r.data.len());
                    if !taken.is_empty() && bytes + len > self.s.max_request_size_bytes {
                        break;
                    }
                    bytes += len;
                    taken.push(heads.next().expect("peeked").1);
                }
                self.send_request(&conn, node, taken).await;
                if retrying {
                    break; // retried batches settle before anything else
                }
            }
        }
    }

    /// The live connection to `node`; otherwise starts connecting (once)
    /// and answers None.
    fn connection(&mut self, node: i32) -> Option<Connection> {
        if let Some(c) = self.conns.get(&node) {
            if c.is_alive() {
                return Some(c.clone());
            }
            self.conns.remove(&node);
        }
        if self
            .connect_not_before
            .get(&node)
            .is_some_and(|t| *t > Instant::now())
        {
            return None; // the last attempt failed; its backoff runs
        }
        if self.connecting.insert(node) {
            let addr = self.cluster.brokers.get(&node).cloned();
            let s = self.s.clone();
            self.in_flight.push(Box::pin(async move {
                let result = match addr {
                    Some(a) => connect(&a, &s.security, &s.client_id, s.request_timeout).await,
                    None => Err(Error::Protocol(format!("no address for broker {node}"))),
                };
                Event::Connected(node, result)
            }));
        }
        None
    }

    async fn send_request(&mut self, conn: &Connection, node: i32, tps: Vec<Tp>) {
        let mut by_topic: Vec<TopicProduceData> = Vec::new();
        for tp in &tps {
            let data = self.parts[tp].ready.front().expect("a head").data.clone();
            let pd = PartitionProduceData::default()
                .with_index(tp.1)
                .with_records(Some(data));
            match by_topic.iter_mut().find(|t| t.name.0.as_str() == &*tp.0) {
                Some(t) => t.partition_data.push(pd),
                None => by_topic.push(
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(tp.0.to_string())))
                        .with_partition_data(vec![pd]),
                ),
            }
        }
        let req = ProduceRequest::default()
            .with_acks(self.s.acks.code())
            .with_timeout_ms(self.s.request_timeout.as_millis().min(i32::MAX as u128) as i32)
            .with_topic_data(by_topic);
        for tp in &tps {
            self.parts.get_mut(tp).expect("part").in_flight = true;
        }
        self.pipes.entry(node).or_default().in_flight += 1;
        let timeout = self.s.request_timeout + Duration::from_secs(5);
        let sent = async {
            let version = conn.version::<ProduceRequest>(PRODUCE_VERSIONS)?;
            Ok::<_, Error>((conn.send(&req, version).await?, version))
        }
        .await;
        let conn2 = conn.clone();
        let fut: BoxFuture<'static, Event> = match sent {
            Ok((rx, version)) => Box::pin(async move {
                let result = match tokio::time::timeout(timeout, rx).await {
                    Ok(Ok(Ok(mut body))) => {
                        ProduceResponse::decode(&mut body, version).map_err(Error::codec)
                    }
                    Ok(Ok(Err(e))) => Err(e),
                    Ok(Err(_)) => Err(Error::Closed),
                    Err(_) => Err(Error::Timeout(format!("Produce to broker {node}"))),
                };
                Event::Produce {
                    node,
                    conn: conn2,
                    parts: tps,
                    result,
                }
            }),
            Err(e) => Box::pin(async move {
                Event::Produce {
                    node,
                    conn: conn2,
                    parts: tps,
                    result: Err(e),
                }
            }),
        };
        self.in_flight.push(fut);
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Produce {
                node,
                conn,
                parts,
                result,
            } => self.on_response(node, &conn, parts, result),
            Event::Metadata(result) => {
                self.metadata_in_flight = false;
                self.metadata_not_before = Instant::now() + METADATA_RETRY;
                match result {
                    Ok(resp) => {
                        self.metadata_due = false;
                        self.metadata_read = Instant::now();
                        for (topic, code) in self.cluster.apply(resp) {
                            self.topic_error(&topic, code);
                        }
                        self.route_unrouted();
                    }
                    Err(e) => tracing::debug!(error = %e, "metadata request failed"),
                }
            }
            Event::Connected(node, Ok(c)) => {
                self.connecting.remove(&node);
                self.connect_not_before.remove(&node);
                self.conns.insert(node, c);
            }
            Event::Connected(node, Err(e)) => {
                self.connecting.remove(&node);
                let now = Instant::now();
                self.connect_not_before
                    .insert(node, now + self.s.retry_backoff);
                tracing::debug!(node, error = %e, "connecting failed");
                self.metadata_due = true;
                // The batches that were due for this broker count an attempt
                // (each then waits out its backoff, as after a failed send).
                let waiting: Vec<Tp> = self
                    .parts
                    .iter()
                    .filter(|(tp, p)| {
                        !p.in_flight
                            && p.ready.front().is_some_and(|r| r.not_before <= now)
                            && self.leader(tp) == node
                    })
                    .map(|(tp, _)| tp.clone())
                    .collect();
                for tp in waiting {
                    self.settle_failed(&tp, node, &e, true);
                }
            }
        }
    }

    fn on_response(
        &mut self,
        node: i32,
        conn: &Connection,
        parts: Vec<Tp>,
        result: Result<ProduceResponse>,
    ) {
        if let Some(p) = self.pipes.get_mut(&node) {
            p.in_flight -= 1;
        }
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(node, error = %e, "produce request failed");
                // Only the connection this request used: a newer one to the
                // same broker may be fine.
                if self.conns.get(&node).is_some_and(|c| c.same(conn)) {
                    self.conns.remove(&node);
                }
                self.metadata_due = true;
                self.halt(node);
                let retriable = e.is_retriable() || matches!(e, Error::Closed);
                for tp in parts {
                    self.settle_failed(&tp, node, &e, retriable);
                }
                return;
            }
        };
        let mut answers: HashMap<(&str, i32), Answer> = HashMap::new();
        for t in &resp.responses {
            for p in &t.partition_responses {
                answers.insert(
                    (t.name.0.as_str(), p.index),
                    (
                        p.error_code,
                        p.base_offset,
                        p.log_append_time_ms,
                        p.error_message.as_ref().map(|m| m.to_string()),
                    ),
                );
            }
        }
        let answers: HashMap<Tp, Answer> = parts
            .iter()
            .filter_map(|tp| {
                answers
                    .get(&(&*tp.0, tp.1))
                    .map(|a| (tp.clone(), a.clone()))
            })
            .collect();
        for tp in parts {
            match answers.get(&tp) {
                Some(&(0, base_offset, append_time, _)) => {
                    let part = self.parts.get_mut(&tp).expect("part");
                    part.in_flight = false;
                    let batch = part.ready.pop_front().expect("head in flight");
                    for (i, w) in batch.waiters.into_iter().enumerate() {
                        let _ = w.reply.send(Ok(RecordMetadata {
                            topic: tp.0.to_string(),
                            partition: tp.1,
                            offset: base_offset + i as i64,
                            timestamp_ms: if append_time >= 0 {
                                append_time
                            } else {
                                w.timestamp_ms
                            },
                        }));
                    }
                }
                Some((code, _, _, message)) => {
                    let e = Error::kafka(
                        *code,
                        format!(
                            "{}-{}{}",
                            tp.0,
                            tp.1,
                            message
                                .as_ref()
                                .map(|m| format!(": {m}"))
                                .unwrap_or_default()
                        ),
                    );
                    let retriable = e.is_retriable();
                    if retriable {
                        self.halt(node);
                        // Leadership moved, or the topic is being created.
                        if matches!(code, 3 | 5 | 6 | 13 | 19 | 20) {
                            self.metadata_due = true;
                        }
                    }
                    self.settle_failed(&tp, node, &e, retriable);
                }
                None => {
                    let e =
                        Error::Protocol(format!("the Produce response left out {}-{}", tp.0, tp.1));
                    self.halt(node);
                    self.settle_failed(&tp, node, &e, true);
                }
            }
        }
    }

    fn halt(&mut self, node: i32) {
        self.pipes.entry(node).or_default().halted = true;
    }

    /// The head batch of `tp` failed: retried later, or failed for good.
    fn settle_failed(&mut self, tp: &Tp, node: i32, e: &Error, retriable: bool) {
        let Some(part) = self.parts.get_mut(tp) else {
            return;
        };
        part.in_flight = false;
        let Some(head) = part.ready.front_mut() else {
            return;
        };
        head.attempts += 1;
        let oldest = head.waiters.iter().map(|w| w.enqueued).min();
        let expired = oldest.is_some_and(|t| t.elapsed() >= self.s.delivery_timeout);
        if retriable && head.attempts <= self.s.retries && !expired {
            head.retry = true;
            head.failed_on = node;
            head.not_before = Instant::now() + self.s.retry_backoff;
            tracing::debug!(topic = %tp.0, partition = tp.1, attempt = head.attempts, error = %e, "retrying batch");
            return;
        }
        let batch = part.ready.pop_front().expect("head");
        fail_waiters(batch.waiters, e);
    }

    /// Fails records whose delivery timeout passed while they waited for
    /// metadata or in a batch not in flight.
    fn expire(&mut self) {
        let limit = self.s.delivery_timeout;
        let late = |t: Instant| t.elapsed() >= limit;
        for (topic, waiting) in self.unrouted.iter_mut() {
            if waiting.iter().any(|q| late(q.enqueued)) {
                let (gone, keep): (Vec<_>, Vec<_>) =
                    waiting.drain(..).partition(|q| late(q.enqueued));
                *waiting = keep;
                for q in gone {
                    let _ = q.reply.send(Err(Error::Timeout(format!(
                        "no metadata for topic {topic} within the delivery timeout"
                    ))));
                }
            }
        }
        self.unrouted.retain(|_, w| !w.is_empty());
        for (tp, p) in self.parts.iter_mut() {
            if p.in_flight {
                continue;
            }
            while p
                .ready
                .front()
                .is_some_and(|r| r.waiters.iter().any(|w| late(w.enqueued)))
            {
                let r = p.ready.pop_front().expect("front");
                fail_waiters(
                    r.waiters,
                    &Error::Timeout(format!(
                        "{}-{}: not delivered within the delivery timeout",
                        tp.0, tp.1
                    )),
                );
            }
        }
    }
}

fn fail_waiters(waiters: Vec<Waiter>, e: &Error) {
    for w in waiters {
        let _ = w.reply.send(Err(clone_error(e)));
    }
}

/// Errors are not `Clone` (they may hold an `io::Error`); each record gets
/// an equivalent one.
fn clone_error(e: &Error) -> Error {
    match e {
        Error::Kafka { code, context, .. } => Error::kafka(*code, context.trim_start_matches(": ")),
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        Error::Timeout(m) => Error::Timeout(m.clone()),
        Error::Protocol(m) => Error::Protocol(m.clone()),
        Error::Unsupported(m) => Error::Unsupported(m.clone()),
        Error::Config(m) => Error::Config(m.clone()),
        Error::Corrupt(m) => Error::Corrupt(m.clone()),
        Error::Auth(m) => Error::Auth(m.clone()),
        Error::Tls(m) => Error::Tls(m.clone()),
        Error::Closed => Error::Closed,
        #[cfg(feature = "rdkafka")]
        Error::Rdkafka(k) => Error::Protocol(k.to_string()),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
