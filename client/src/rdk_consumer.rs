//! The rdkafka consumer backend of [`crate::KafkaSource`]: librdkafka's
//! group consumer (classic protocol, `range` assignor, like the native one)
//! with its own offset commits and offset store turned off. This module
//! commits, per partition, only the offsets below the first record not yet
//! acknowledged: periodically, on request, in the rebalance callback before
//! partitions are given up, and on close — the same rule as the native
//! consumer, with the same [`Ack`]s.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use crate::acks::{Ack, Acks, ConsumerRecord, Tp};
use crate::error::{Error, Result};
use crate::native::consumer::UNACKED_PER_PARTITION_MAX;
use crate::settings::{AutoOffsetReset, KafkaConsumerSettings, RebalanceEvent, RebalanceListener};

/// How often held-back partitions are looked at for resumption.
const FLOW_CHECK: Duration = Duration::from_millis(50);
/// How long a seek may wait for librdkafka.
const SEEK_TIMEOUT: Duration = Duration::from_secs(10);

/// Partitions not fetched now, and why.
#[derive(Default)]
struct Flow {
    /// Paused by the caller.
    paused: HashSet<Tp>,
    /// Paused because too many of their records await acknowledgement.
    held: HashSet<Tp>,
}

/// The rebalance callbacks: commit what is acknowledged before partitions
/// are given up, and forget them.
struct SourceContext {
    acks: Arc<Mutex<Acks>>,
    flow: Arc<Mutex<Flow>>,
    listener: Option<RebalanceListener>,
}

impl SourceContext {
    fn tell(&self, e: RebalanceEvent) {
        if let Some(l) = &self.listener {
            (l.0)(&e);
        }
    }
}

fn plain(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect()
}

impl ClientContext for SourceContext {}

impl ConsumerContext for SourceContext {
    fn pre_rebalance(&self, c: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let revoked: HashSet<(String, i32)> = tpl
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .collect();
                let gone = |tp: &Tp| revoked.contains(&(tp.0.to_string(), tp.1));
                let points: Vec<(Tp, i64)> = {
                    let a = self.acks.lock().expect("acks lock");
                    a.due().into_iter().filter(|(tp, _)| gone(tp)).collect()
                };
                if !points.is_empty() {
                    match c.commit(&offsets(&points), CommitMode::Sync) {
                        Ok(()) => tracing::debug!(
                            partitions = points.len(),
                            "committed before giving partitions up"
                        ),
                        // Their unacknowledged work replays at the next
                        // owner, from the last commit.
                        Err(e) => tracing::warn!(error = %e, "commit before the rebalance failed"),
                    }
                }
                self.acks
                    .lock()
                    .expect("acks lock")
                    .partitions
                    .retain(|tp, _| !gone(tp));
                let mut f = self.flow.lock().expect("flow lock");
                f.held.retain(|tp| !gone(tp));
                f.paused.retain(|tp| !gone(tp));
                drop(f);
                if tpl.count() > 0 {
                    self.tell(if c.assignment_lost() {
                        RebalanceEvent::Lost(plain(tpl))
                    } else {
                        RebalanceEvent::Revoked(plain(tpl))
                    });
                }
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => tracing::warn!(error = %e, "rebalance failed"),
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            tracing::debug!(partitions = tpl.count(), "assignment taken");
            if tpl.count() > 0 {
                self.tell(RebalanceEvent::Assigned(plain(tpl)));
            }
        }
    }
}

type Inner = StreamConsumer<SourceContext>;

/// A KafkaSource over librdkafka.
pub struct RdConsumer {
    /// None once closed.
    consumer: Option<Arc<Inner>>,
    acks: Arc<Mutex<Acks>>,
    flow: Arc<Mutex<Flow>>,
    names: std::collections::HashMap<String, Arc<str>>,
    ticker: tokio::task::JoinHandle<()>,
}

impl RdConsumer {
    pub fn start(s: &KafkaConsumerSettings, topics: &[&str]) -> Result<RdConsumer> {
        s.validate()?;
        if topics.is_empty() {
            return Err(Error::Config("subscribe to at least one topic".into()));
        }
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &s.bootstrap_servers)
            .set("group.id", &s.group_id)
            .set("client.id", &s.client_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("partition.assignment.strategy", "range")
            .set(
                "auto.offset.reset",
                match s.auto_offset_reset {
                    AutoOffsetReset::Earliest => "earliest",
                    AutoOffsetReset::Latest => "latest",
                },
            )
            .set("session.timeout.ms", millis(s.session_timeout))
            .set("heartbeat.interval.ms", millis(s.heartbeat_interval))
            .set(
                "max.poll.interval.ms",
                millis(s.rebalance_timeout.max(s.session_timeout)),
            )
            .set("fetch.wait.max.ms", millis(s.fetch_max_wait))
            .set("fetch.max.bytes", s.fetch_max_bytes.to_string())
            .set(
                "max.partition.fetch.bytes",
                s.max_partition_fetch_bytes.to_string(),
            )
            .set("socket.timeout.ms", millis(s.request_timeout));
        crate::rdk::security_properties(&mut c, &s.security);
        for (k, v) in &s.rdkafka_properties {
            c.set(k, v);
        }
        let acks = Arc::new(Mutex::new(Acks::default()));
        let flow = Arc::new(Mutex::new(Flow::default()));
        let context = SourceContext {
            acks: acks.clone(),
            flow: flow.clone(),
            listener: s.rebalance_listener.clone(),
        };
        let consumer: Arc<Inner> = Arc::new(c.create_with_context(context)?);
        consumer.subscribe(topics)?;
        let ticker = tokio::spawn(tick(
            Arc::downgrade(&consumer),
            acks.clone(),
            flow.clone(),
            s.auto_commit_interval,
        ));
        Ok(RdConsumer {
            consumer: Some(consumer),
            acks,
            flow,
            names: Default::default(),
            ticker,
        })
    }

    fn consumer(&self) -> Result<&Arc<Inner>> {
        self.consumer.as_ref().ok_or(Error::Closed)
    }

    /// The next record; an error librdkafka reports for the subscription
    /// (an unknown topic, a refused authorisation) comes as `Err`, and the
    /// consumer goes on after it.
    pub async fn next(&mut self) -> Option<Result<(ConsumerRecord, Ack)>> {
        let consumer = self.consumer.clone()?;
        let m = match consumer.recv().await {
            Ok(m) => m,
            Err(e) => return Some(Err(e.into())),
        };
        let topic = m.topic();
        let name = match self.names.get(topic) {
            Some(n) => n.clone(),
            None => {
                let n: Arc<str> = Arc::from(topic);
                self.names.insert(topic.to_owned(), n.clone());
                n
            }
        };
        let headers = m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_owned(), h.value.map(Bytes::copy_from_slice)))
                    .collect()
            })
            .unwrap_or_default();
        let rec = ConsumerRecord {
            topic: topic.to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            timestamp_ms: m.timestamp().to_millis().unwrap_or(-1),
            key: m.key().map(Bytes::copy_from_slice),
            value: m.payload().map(Bytes::copy_from_slice),
            headers,
        };
        let tp: Tp = (name, rec.partition);
        let (epoch, unacked) = {
            let mut a = self.acks.lock().expect("acks lock");
            // A partition's tracking starts at its first record: nothing
            // is committed for it before one is acknowledged.
            if !a.partitions.contains_key(&tp) {
                a.take(tp.clone(), rec.offset);
            }
            a.deliver(&tp, rec.offset)
        };
        if unacked >= UNACKED_PER_PARTITION_MAX
            && self.flow.lock().expect("flow lock").held.insert(tp.clone())
        {
            if let Err(e) = consumer.pause(&partitions(&[&tp])) {
                tracing::warn!(error = %e, "holding back a partition failed");
            }
        }
        let ack = Ack {
            acks: self.acks.clone(),
            tp,
            offset: rec.offset,
            epoch,
        };
        Some(Ok((rec, ack)))
    }

    pub fn assignment(&self) -> Vec<(String, i32)> {
        let Ok(c) = self.consumer() else {
            return Vec::new();
        };
        c.assignment()
            .map(|tpl| {
                tpl.elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn pause(&mut self, list: &[(&str, i32)]) -> Result<()> {
        let tps: Vec<Tp> = list.iter().map(|(t, p)| (self.name(t), *p)).collect();
        let c = self.consumer()?;
        c.pause(&partitions(&tps.iter().collect::<Vec<_>>()))?;
        self.flow
            .lock()
            .expect("flow lock")
            .paused
            .extend(tps.iter().cloned());
        Ok(())
    }

    pub fn resume(&mut self, list: &[(&str, i32)]) -> Result<()> {
        let tps: Vec<Tp> = list.iter().map(|(t, p)| (self.name(t), *p)).collect();
        let c = self.consumer()?;
        let go: Vec<&Tp> = {
            let mut f = self.flow.lock().expect("flow lock");
            tps.iter()
                .filter(|tp| f.paused.remove(*tp) && !f.held.contains(*tp))
                .collect()
        };
        if !go.is_empty() {
            c.resume(&partitions(&go))?;
        }
        Ok(())
    }

    pub async fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::Config(format!("seek to offset {offset}")));
        }
        if !self
            .assignment()
            .iter()
            .any(|(t, p)| t == topic && *p == partition)
        {
            return Err(Error::Config(format!(
                "{topic}-{partition} is not assigned to this member"
            )));
        }
        let c = self.consumer()?.clone();
        let t = topic.to_owned();
        tokio::task::spawn_blocking(move || {
            c.seek(&t, partition, Offset::Offset(offset), SEEK_TIMEOUT)
        })
        .await
        .map_err(|_| Error::Closed)??;
        let tp = (self.name(topic), partition);
        self.acks.lock().expect("acks lock").seek(&tp, offset);
        Ok(())
    }

    /// Commits what is acknowledged now.
    pub async fn commit(&self) -> Result<()> {
        commit(self.consumer()?.clone(), self.acks.clone()).await
    }

    /// Commits what is acknowledged and leaves the group.
    pub async fn close(mut self) -> Result<()> {
        self.ticker.abort();
        let r = self.commit().await;
        if let Some(c) = self.consumer.take() {
            // Leaving the group waits for librdkafka's close.
            let _ = tokio::task::spawn_blocking(move || drop(c)).await;
        }
        r
    }

    fn name(&mut self, topic: &str) -> Arc<str> {
        self.names
            .entry(topic.to_owned())
            .or_insert_with(|| Arc::from(topic))
            .clone()
    }
}

impl Drop for RdConsumer {
    fn drop(&mut self) {
        self.ticker.abort();
        // librdkafka's close (which commits in the revocation callback and
        // leaves the group) blocks: off the async threads when possible.
        if let Some(c) = self.consumer.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(h) => {
                    h.spawn_blocking(move || drop(c));
                }
                Err(_) => drop(c),
            }
        }
    }
}

/// Commits the acknowledged points that moved (a synchronous librdkafka
/// commit, on a blocking thread).
async fn commit(c: Arc<Inner>, acks: Arc<Mutex<Acks>>) -> Result<()> {
    let points = acks.lock().expect("acks lock").due();
    if points.is_empty() {
        return Ok(());
    }
    let tpl = offsets(&points);
    tokio::task::spawn_blocking(move || c.commit(&tpl, CommitMode::Sync))
        .await
        .map_err(|_| Error::Closed)??;
    acks.lock().expect("acks lock").committed(&points);
    Ok(())
}

/// Periodic commits, and resumption of held-back partitions once their
/// unacknowledged records drop to half the bound.
async fn tick(
    consumer: Weak<Inner>,
    acks: Arc<Mutex<Acks>>,
    flow: Arc<Mutex<Flow>>,
    commit_interval: Duration,
) {
    let mut next_commit = Instant::now() + commit_interval;
    loop {
        tokio::time::sleep(FLOW_CHECK).await;
        let Some(c) = consumer.upgrade() else { return };
        let ready: Vec<Tp> = {
            let a = acks.lock().expect("acks lock");
            let mut f = flow.lock().expect("flow lock");
            let ready: Vec<Tp> = f
                .held
                .iter()
                .filter(|tp| a.unacked(tp) <= UNACKED_PER_PARTITION_MAX / 2)
                .cloned()
                .collect();
            for tp in &ready {
                f.held.remove(tp);
            }
            ready
                .into_iter()
                .filter(|tp| !f.paused.contains(tp))
                .collect()
        };
        if !ready.is_empty() {
            if let Err(e) = c.resume(&partitions(&ready.iter().collect::<Vec<_>>())) {
                tracing::warn!(error = %e, "resuming a held-back partition failed");
            }
        }
        if Instant::now() >= next_commit {
            next_commit = Instant::now() + commit_interval;
            if let Err(e) = commit(c, acks.clone()).await {
                tracing::debug!(error = %e, "periodic commit failed");
            }
        }
    }
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

fn partitions(tps: &[&Tp]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for tp in tps {
        tpl.add_partition(&tp.0, tp.1);
    }
    tpl
}

fn offsets(points: &[(Tp, i64)]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for (tp, o) in points {
        // Infallible for a partition just added.
        let _ = tpl.add_partition_offset(&tp.0, tp.1, Offset::Offset(*o));
    }
    tpl
}
