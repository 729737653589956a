//! Transactional producer connections (mode `txn`): each is one
//! transactional id that runs transactions back to back over its
//! partitions, as a Kafka client does: FindCoordinator (key type 1) and
//! InitProducerId once, then per transaction AddPartitionsToTxn, `batches`
//! Produce requests (one transactional batch per partition each, sequences
//! continuing per partition), all pipelined, then EndTxn(commit) once every
//! batch is acknowledged. The latency recorded per transaction is its
//! commit: from the last Produce sent to the EndTxn answer (what
//! `commitTransaction()` costs right after the sends).
//!
//! The classic protocol (AddPartitionsToTxn v3, EndTxn v3, Produce v9), so a
//! Kafka 4.x broker with transaction.version 2 finalized runs it too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProduceRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::records::Compression;
use tokio::io::AsyncWriteExt;

use rutomq_bench::{by_topic, payload, record_batch, BatchProducer};

use crate::produce::unix_ms;
use crate::stats::Shared;
use crate::wire::{self, PRODUCE_VERSION};

/// Versions of the classic transaction protocol (before KIP-890's second
/// phase), which every broker of the race serves.
const FIND_COORDINATOR_VERSION: i16 = 3;
const INIT_PRODUCER_ID_VERSION: i16 = 3;
const ADD_PARTITIONS_VERSION: i16 = 3;
const END_TXN_VERSION: i16 = 3;
/// Retriable answers (coordinator loading, concurrent transactions) are
/// retried this often at most, this far apart.
const RETRIES_MAX: usize = 200;
const RETRY_BACKOFF: Duration = Duration::from_millis(20);

pub struct TxnConfig {
    pub addr: String,
    pub transactional_id: String,
    pub parts: Vec<(String, i32)>,
    pub record_size: usize,
    pub batch_records: usize,
    pub compression: Compression,
    /// Produce requests per transaction.
    pub batches: usize,
    pub timeout_ms: i32,
    /// Records per second for this transactional id (whole transactions:
    /// one begins every `records per transaction / rate` seconds); 0 =
    /// back to back.
    pub rate: f64,
    /// Where in the transaction interval this id's schedule sits, in
    /// [0, 1) from `schedule_start` (the ids spread evenly over it).
    pub phase: f64,
    pub schedule_start: Instant,
}

struct Conn {
    r: wire::Reader,
    w: wire::Writer,
    corr: i32,
}

impl Conn {
    async fn send<R: Request>(&mut self, version: i16, req: &R) -> Result<i32> {
        self.corr = self.corr.wrapping_add(1) & i32::MAX;
        self.w
            .write_all(&wire::encode_frame(self.corr, version, req)?)
            .await?;
        self.w.flush().await?;
        Ok(self.corr)
    }

    async fn recv<R: Request>(&mut self, version: i16, corr: i32) -> Result<R::Response> {
        let (got, body) = wire::read_frame(&mut self.r).await?;
        if got != corr {
            bail!("response {got}, expected {corr}");
        }
        wire::decode_response::<R>(body, version)
    }

    async fn call<R: Request>(&mut self, version: i16, req: &R) -> Result<R::Response> {
        let corr = self.send(version, req).await?;
        self.recv::<R>(version, corr).await
    }
}

/// Kafka's retriable coordinator answers: COORDINATOR_LOAD_IN_PROGRESS,
/// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (Kafka, while its new
/// transaction log loads; one broker here, so no new lookup is needed),
/// CONCURRENT_TRANSACTIONS.
fn retriable(code: i16) -> bool {
    matches!(code, 14 | 15 | 16 | 51)
}

/// The retries of one request: `settled(code)` is true on success, sleeps
/// and is false after a retriable answer, and fails on any other answer or
/// once `RETRIES_MAX` answers were retriable.
struct Retries {
    what: &'static str,
    left: usize,
}

impl Retries {
    fn new(what: &'static str) -> Self {
        Self {
            what,
            left: RETRIES_MAX,
        }
    }

    async fn settled(&mut self, code: i16) -> Result<bool> {
        if code == 0 {
            return Ok(true);
        }
        if !retriable(code) {
            bail!("{}: error {code}", self.what);
        }
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            bail!("{} kept failing (last error {code})", self.what);
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
        Ok(false)
    }
}

pub async fn run(cfg: TxnConfig, shared: Arc<Shared>) -> Result<()> {
    let id = TransactionalId(StrBytes::from_string(cfg.transactional_id.clone()));
    // The coordinator: one broker in every race, but asked as a client does
    // (Kafka creates its transaction log on the first ask).
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(cfg.transactional_id.clone()))
        .with_key_type(1);
    let mut retries = Retries::new("FindCoordinator");
    let coordinator = loop {
        let r = wire::call(&cfg.addr, FIND_COORDINATOR_VERSION, &find).await?;
        if retries.settled(r.error_code).await? {
            break format!("{}:{}", r.host.as_str(), r.port);
        }
    };
    let (r, w) = wire::connect(&coordinator).await?;
    let mut txn = Conn { r, w, corr: 0 };
    let (r, w) = wire::connect(&cfg.addr).await?;
    let mut data = Conn { r, w, corr: 0 };

    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(id.clone()))
        .with_transaction_timeout_ms(cfg.timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let mut retries = Retries::new("InitProducerId");
    let (pid, epoch) = loop {
        let r = txn.call(INIT_PRODUCER_ID_VERSION, &init).await?;
        if retries.settled(r.error_code).await? {
            break (r.producer_id.0, r.producer_epoch);
        }
    };

    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(id.clone())
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(
            by_topic(cfg.parts.iter().map(|(t, p)| (t.clone(), *p)))
                .into_iter()
                .map(|(t, ps)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(wire::topic_name(&t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let end = EndTxnRequest::default()
        .with_transactional_id(id.clone())
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let value = payload(cfg.record_size);
    let mut seqs = vec![0i32; cfg.parts.len()];
    let records_per_txn = (cfg.batches * cfg.batch_records * cfg.parts.len()) as u64;
    let bytes_per_txn = records_per_txn * cfg.record_size as u64;
    let interval =
        (cfg.rate > 0.0).then(|| Duration::from_secs_f64(records_per_txn as f64 / cfg.rate));
    let mut due = match interval {
        Some(iv) => cfg.schedule_start + iv.mul_f64(cfg.phase.clamp(0.0, 1.0)),
        None => Instant::now(),
    };

    while !shared.stopped() {
        // At a fixed rate a transaction begins when due; one begun late
        // (the previous one took longer than the interval) shows in the
        // send lag, since its commit latency does not count the wait.
        if let Some(iv) = interval {
            due += iv;
            tokio::time::sleep_until(due.into()).await;
            shared.sent(due.elapsed().as_micros() as u64);
            if shared.stopped() {
                break;
            }
        }
        // AddPartitionsToTxn (retried while the previous end settles).
        let mut retries = Retries::new("AddPartitionsToTxn");
        loop {
            let r = txn.call(ADD_PARTITIONS_VERSION, &add).await?;
            let code = r
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| &t.results_by_partition)
                .map(|p| p.partition_error_code)
                .find(|&c| c != 0)
                .unwrap_or(0);
            if retries.settled(code).await? {
                break;
            }
        }
        // The transaction's Produce requests, pipelined.
        let mut sent = Vec::with_capacity(cfg.batches);
        for _ in 0..cfg.batches {
            let mut items = Vec::with_capacity(cfg.parts.len());
            for (i, (t, p)) in cfg.parts.iter().enumerate() {
                let producer = BatchProducer {
                    id: pid,
                    epoch,
                    sequence: seqs[i],
                    transactional: true,
                };
                let batch = record_batch(
                    cfg.batch_records,
                    &value,
                    unix_ms(),
                    cfg.compression,
                    Some(producer),
                    false,
                )?;
                seqs[i] = seqs[i].wrapping_add(cfg.batch_records as i32);
                items.push((
                    t.clone(),
                    PartitionProduceData::default()
                        .with_index(*p)
                        .with_records(Some(batch)),
                ));
            }
            let req = ProduceRequest::default()
                .with_transactional_id(Some(id.clone()))
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(
                    by_topic(items)
                        .into_iter()
                        .map(|(t, ps)| {
                            TopicProduceData::default()
                                .with_name(wire::topic_name(&t))
                                .with_partition_data(ps)
                        })
                        .collect(),
                );
            sent.push(data.send(PRODUCE_VERSION, &req).await?);
        }
        let commit_from = Instant::now();
        for corr in sent {
            let r = data.recv::<ProduceRequest>(PRODUCE_VERSION, corr).await?;
            for t in &r.responses {
                for p in &t.partition_responses {
                    if p.error_code != 0 {
                        shared.error(p.error_code);
                        bail!("transactional produce: error {}", p.error_code);
                    }
                }
            }
        }
        let r = txn.call(END_TXN_VERSION, &end).await?;
        if r.error_code != 0 {
            shared.error(r.error_code);
            bail!("EndTxn: error {}", r.error_code);
        }
        let commit_us = commit_from.elapsed().as_micros() as u64;
        shared
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        shared.done(records_per_txn, bytes_per_txn, Some(commit_us));
    }
    Ok(())
}
