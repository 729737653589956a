//! Producer connections. Each owns some partitions and sends ONE pre-built
//! Produce frame over and over: one record batch per partition, encoded once.
//! Per send only the correlation id, the batch timestamps and their CRCs are
//! patched, so the generator costs a CRC pass and a socket write per request.
//! Up to `in_flight` requests are pipelined; responses come back in order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use bytes::BytesMut;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::records::Compression;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Semaphore};

use rutomq_bench::layout::{CRC_AT, CRC_FROM, FIRST_TIMESTAMP_AT, MAX_TIMESTAMP_AT};
use rutomq_bench::{by_topic, payload, record_batch};

use crate::stats::Shared;
use crate::wire::{self, PRODUCE_VERSION};

pub struct ProducerConfig {
    pub addr: String,
    pub parts: Vec<(String, i32)>,
    pub record_size: usize,
    pub batch_records: usize,
    /// Keyed records (see `record_batch`).
    pub keyed: bool,
    pub compression: Compression,
    pub acks: i16,
    pub in_flight: usize,
    /// Records per second for this connection; 0 = as fast as acknowledged.
    pub rate: f64,
    /// At a fixed rate, where in the send interval this connection's
    /// schedule sits, in [0, 1) from `schedule_start`: the connections are
    /// spread evenly over it, as independent producers are, instead of all
    /// sending in the same instant (which made bursts of N requests with
    /// nothing between them).
    pub phase: f64,
    pub schedule_start: Instant,
    /// Stop after this many records (all connections together).
    pub records_max: Option<u64>,
}

/// A Produce frame and where its batches sit inside it.
struct Template {
    frame: BytesMut,
    batches: Vec<std::ops::Range<usize>>,
    records: u64,
    payload_bytes: u64,
}

fn build_template(cfg: &ProducerConfig) -> Result<Template> {
    let value = payload(cfg.record_size);
    let batch = record_batch(
        cfg.batch_records,
        &value,
        0,
        cfg.compression,
        None,
        cfg.keyed,
    )?;
    let topics = by_topic(cfg.parts.iter().map(|(t, p)| (t.clone(), *p)))
        .into_iter()
        .map(|(t, parts)| {
            TopicProduceData::default()
                .with_name(wire::topic_name(&t))
                .with_partition_data(
                    parts
                        .into_iter()
                        .map(|p| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(batch.clone()))
                        })
                        .collect(),
                )
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(cfg.acks)
        .with_timeout_ms(30_000)
        .with_topic_data(topics);
    let frame = wire::encode_frame(0, PRODUCE_VERSION, &req)?;
    // Find the batches, in order; the payload is random so a match is one.
    let mut batches = Vec::new();
    let mut from = 0;
    for _ in &cfg.parts {
        let at = frame[from..]
            .windows(batch.len())
            .position(|w| w == &batch[..])
            .context("batch not found in its frame")?
            + from;
        batches.push(at..at + batch.len());
        from = at + batch.len();
    }
    Ok(Template {
        frame,
        batches,
        records: (cfg.parts.len() * cfg.batch_records) as u64,
        payload_bytes: (cfg.parts.len() * cfg.batch_records * cfg.record_size) as u64,
    })
}

/// Sets the correlation id and stamps every batch with `now_ms`.
fn stamp(t: &mut Template, correlation_id: i32, now_ms: i64) {
    t.frame[8..12].copy_from_slice(&correlation_id.to_be_bytes());
    for r in &t.batches {
        let b = &mut t.frame[r.clone()];
        b[FIRST_TIMESTAMP_AT..FIRST_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
        b[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_FROM..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
}

pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs one producer connection until `shared.stop` or its record budget.
pub async fn run(
    cfg: ProducerConfig,
    shared: Arc<Shared>,
    sent: Arc<std::sync::atomic::AtomicU64>,
) -> Result<()> {
    use std::sync::atomic::Ordering;
    let mut tpl = build_template(&cfg)?;
    let (mut r, mut w) = wire::connect(&cfg.addr).await?;
    let permits = Arc::new(Semaphore::new(cfg.in_flight.max(1)));
    // (correlation id, the time the request was due)
    let (tx, mut rx) = mpsc::unbounded_channel::<(i32, Instant)>();
    let records = tpl.records;
    let payload = tpl.payload_bytes;
    let expected_parts = cfg.parts.len();
    let acks = cfg.acks;
    let reader_shared = shared.clone();
    let reader_permits = permits.clone();
    let reader = tokio::spawn(async move {
        let mut pending = VecDeque::new();
        loop {
            let Some(due) = rx.recv().await else {
                return Ok::<(), anyhow::Error>(());
            };
            pending.push_back(due);
            while let Some((corr, due)) = pending.pop_front() {
                let (got, body) = wire::read_frame(&mut r).await?;
                if got != corr {
                    bail!("produce response {got}, expected {corr}");
                }
                let resp = wire::decode_response::<ProduceRequest>(body, PRODUCE_VERSION)?;
                let mut failed = 0usize;
                let mut answered = 0usize;
                for t in &resp.responses {
                    for p in &t.partition_responses {
                        answered += 1;
                        if p.error_code != 0 {
                            failed += 1;
                            if reader_shared.error(p.error_code) {
                                eprintln!(
                                    "produce {}/{}: error {} {}",
                                    t.name.0,
                                    p.index,
                                    p.error_code,
                                    p.error_message.as_deref().unwrap_or("")
                                );
                            }
                        }
                    }
                }
                for _ in answered..expected_parts {
                    // A partition missing from the response.
                    reader_shared.error(-1);
                    failed += 1;
                }
                let ok_parts = (expected_parts - failed.min(expected_parts)) as u64;
                let per_part = records / expected_parts as u64;
                let lat = due.elapsed().as_micros() as u64;
                reader_shared.done(
                    ok_parts * per_part,
                    ok_parts * per_part * payload / records,
                    Some(lat),
                );
                reader_permits.add_permits(1);
                while let Ok(more) = rx.try_recv() {
                    pending.push_back(more);
                }
            }
        }
    });

    let interval = (cfg.rate > 0.0).then(|| Duration::from_secs_f64(records as f64 / cfg.rate));
    let mut due = match interval {
        Some(iv) => cfg.schedule_start + iv.mul_f64(cfg.phase.clamp(0.0, 1.0)),
        None => Instant::now(),
    };
    let mut corr = 0i32;
    while !shared.stopped() {
        if let Some(max) = cfg.records_max {
            if sent.fetch_add(records, Ordering::Relaxed) >= max {
                break;
            }
        }
        if let Some(iv) = interval {
            due += iv;
            tokio::time::sleep_until(due.into()).await;
        }
        if acks != 0 {
            permits.acquire().await?.forget();
        }
        if shared.stopped() {
            break;
        }
        corr = corr.wrapping_add(1) & i32::MAX;
        stamp(&mut tpl, corr, unix_ms());
        // Latency counts from when the request was due, so a broker that
        // falls behind a fixed rate is charged for the queueing too.
        let started = if interval.is_some() {
            due
        } else {
            Instant::now()
        };
        w.write_all(&tpl.frame).await.context("send produce")?;
        // Under TLS the last records wait in the session until flushed
        // (a no-op on TCP).
        w.flush().await.context("send produce")?;
        shared.sent(started.elapsed().as_micros() as u64);
        shared.requests.fetch_add(1, Ordering::Relaxed);
        if acks == 0 {
            shared.done(records, payload, None);
        } else if tx.send((corr, started)).is_err() {
            break;
        }
    }
    drop(tx);
    if acks != 0 {
        reader.await??;
    }
    Ok(())
}
