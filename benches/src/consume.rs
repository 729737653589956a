//! Consumer connections: sessionless Fetch requests for the partitions a
//! connection owns, one in flight, next offsets taken from the batch headers
//! (records are counted, never decoded). End-to-end latency is the time from
//! a batch's producer timestamp to its arrival here.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use tokio::io::AsyncWriteExt;

use rutomq_bench::by_topic;

use crate::produce::unix_ms;
use crate::stats::Shared;
use crate::wire::{self, FETCH_VERSION};

pub struct ConsumerConfig {
    pub addr: String,
    /// Partitions and the offset to start each at.
    pub parts: Vec<(String, i32, i64)>,
    pub max_wait_ms: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub record_size: usize,
    /// Stop once this many records were consumed (all connections).
    pub records_max: Option<u64>,
    /// Record end-to-end latency (producer timestamp to arrival).
    pub e2e: bool,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
}

use rutomq_bench::layout::{
    ATTRIBUTES_AT as BATCH_ATTRIBUTES_AT, BATCH_LENGTH_AT, HEADER_LEN as BATCH_HEADER_LEN,
    LAST_OFFSET_DELTA_AT as BATCH_LAST_OFFSET_DELTA_AT, MAX_TIMESTAMP_AT as BATCH_MAX_TS_AT,
    RECORDS_COUNT_AT as BATCH_RECORDS_AT,
};

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// What the complete batches of `records` hold past `from`: (records, next
/// offset, newest producer timestamp per batch with its record count).
fn walk(records: &Bytes, from: i64, out_ts: &mut Vec<(i64, u64)>) -> Result<(u64, i64)> {
    let mut at = 0usize;
    let mut count = 0u64;
    let mut next = from;
    while records.len() - at >= BATCH_HEADER_LEN {
        let b = &records[at..];
        let len = be_i32(b, BATCH_LENGTH_AT);
        if len < (BATCH_HEADER_LEN - 12) as i32 {
            bail!("batch length {len} at byte {at}");
        }
        let total = 12 + len as usize;
        if b.len() < total {
            break; // a partial batch at the end of a fetch
        }
        let base = be_i64(b, 0);
        let last = base + i64::from(be_i32(b, BATCH_LAST_OFFSET_DELTA_AT));
        let control =
            i16::from_be_bytes([b[BATCH_ATTRIBUTES_AT], b[BATCH_ATTRIBUTES_AT + 1]]) & 0x20 != 0;
        if last >= next {
            if !control {
                // Records of the batch before `from` were consumed already.
                let n = be_i32(b, BATCH_RECORDS_AT).max(0) as u64;
                let skip = (next - base).clamp(0, n as i64) as u64;
                count += n - skip;
                out_ts.push((be_i64(b, BATCH_MAX_TS_AT), n - skip));
            }
            next = last + 1;
        }
        at += total;
    }
    Ok((count, next))
}

pub async fn run(cfg: ConsumerConfig, shared: Arc<Shared>) -> Result<()> {
    let (mut r, mut w) = wire::connect(&cfg.addr).await?;
    let mut offsets: Vec<i64> = cfg.parts.iter().map(|p| p.2).collect();
    let mut corr = 0i32;
    let mut stamps = Vec::new();
    while !shared.stopped() {
        let parts = cfg.parts.iter().zip(&offsets).map(|((t, p, _), off)| {
            let part = FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(*off)
                .with_partition_max_bytes(cfg.partition_max_bytes);
            (t.clone(), part)
        });
        let topics = by_topic(parts)
            .into_iter()
            .map(|(t, partitions)| {
                FetchTopic::default()
                    .with_topic(wire::topic_name(&t))
                    .with_partitions(partitions)
            })
            .collect();
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(cfg.max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(cfg.max_bytes)
            .with_session_epoch(-1)
            .with_isolation_level(cfg.isolation_level)
            .with_topics(topics);
        corr = corr.wrapping_add(1) & i32::MAX;
        w.write_all(&wire::encode_frame(corr, FETCH_VERSION, &req)?)
            .await
            .context("send fetch")?;
        // Under TLS the last records wait in the session until flushed
        // (a no-op on TCP).
        w.flush().await.context("send fetch")?;
        let (got, body) = wire::read_frame(&mut r).await?;
        if got != corr {
            bail!("fetch response {got}, expected {corr}");
        }
        let resp = wire::decode_response::<FetchRequest>(body, FETCH_VERSION)?;
        shared.requests.fetch_add(1, Ordering::Relaxed);
        if resp.error_code != 0 {
            bail!("fetch failed: error {}", resp.error_code);
        }
        let now = unix_ms();
        for t in &resp.responses {
            for p in &t.partitions {
                let Some(i) = cfg
                    .parts
                    .iter()
                    .position(|(n, pi, _)| n == t.topic.0.as_str() && *pi == p.partition_index)
                else {
                    continue;
                };
                if p.error_code != 0 {
                    if shared.error(p.error_code) {
                        eprintln!(
                            "fetch {}/{}: error {}",
                            t.topic.0, p.partition_index, p.error_code
                        );
                    }
                    continue;
                }
                let Some(records) = &p.records else { continue };
                stamps.clear();
                let (_, next) = walk(records, offsets[i], &mut stamps)?;
                offsets[i] = next;
                for &(ts, n) in &stamps {
                    let lat = cfg.e2e.then(|| (now - ts).max(0) as u64 * 1000);
                    shared.done(n, n * cfg.record_size as u64, lat);
                }
            }
        }
        if let Some(max) = cfg.records_max {
            if shared.records_total.load(Ordering::Relaxed) >= max {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, n: i32, ts: i64) -> Vec<u8> {
        let mut b = vec![0u8; BATCH_HEADER_LEN + 5];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[BATCH_LAST_OFFSET_DELTA_AT..BATCH_LAST_OFFSET_DELTA_AT + 4]
            .copy_from_slice(&(n - 1).to_be_bytes());
        b[BATCH_MAX_TS_AT..BATCH_MAX_TS_AT + 8].copy_from_slice(&ts.to_be_bytes());
        b[BATCH_RECORDS_AT..BATCH_RECORDS_AT + 4].copy_from_slice(&n.to_be_bytes());
        b
    }

    #[test]
    fn walk_counts_past_the_fetch_offset_and_stops_at_a_partial_batch() {
        let mut all = batch(0, 10, 5);
        all.extend(batch(10, 10, 7));
        let partial = batch(20, 10, 9);
        all.extend(&partial[..30]);
        let mut ts = Vec::new();
        let (n, next) = walk(&Bytes::from(all), 4, &mut ts).unwrap();
        assert_eq!((n, next), (16, 20));
        assert_eq!(ts, vec![(5, 6), (7, 10)]);
    }
}
