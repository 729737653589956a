//! Fetch (key 1): exact byte ranges of committed spans, base offsets
//! patched, long-poll on high-watermark notifications (local commits and
//! LISTEN/NOTIFY from other agents) up to `max_wait_ms`.
//!
//! read_committed (isolation level 1) reads stop at the last stable offset
//! and list the aborted transactions of what they return (see
//! [`crate::read::StableIndex`]).
//!
//! Fetch sessions are answered sessionless (session id 0, full responses
//! holding every requested partition), which every client handles.

mod splice;

use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::future::{select, Either, FutureExt};
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use uuid::Uuid;

use super::access::allowed;
use super::{throttle, Api, Later, Req};
use crate::error::ErrorCode;
use crate::limits::{FETCH_RESPONSE_BYTES_MAX, FETCH_WAIT_MS_MAX, QUOTA_THROTTLE_MS_MAX};
use crate::quota::{self, Kind};
use crate::read::{Enough, Records};
use crate::security::acl::{op, resource};
use crate::shard::{FetchGrant, Shard};
use splice::marker;
pub use splice::FetchReply;

struct Wanted {
    name: TopicName,
    topic_id: Uuid,
    resolved: Result<Option<(Uuid, i32)>, ErrorCode>,
    partitions: Vec<(i32, i64, usize)>,
}

/// Fetch, versions 4–18.
pub const API: Api<FetchRequest> = Api::new(ApiKey::Fetch, 4, 18);

pub async fn handle(shard: &Rc<Shard>, req: &Req, mut body: FetchRequest) -> Later {
    let wanted = resolve(shard, req, req.version, std::mem::take(&mut body.topics)).await;
    let (shard, correlation_id, version) = (shard.clone(), req.header.correlation_id, req.version);
    let quota = throttle::sensor(req, Kind::Fetch);
    if let Some((sensor, bound)) = &quota {
        // Already over (another connection of the client's spent it):
        // answered empty at once, as Kafka's answer would be after
        // reading, without the reading.
        let ms = sensor.throttle_ms(*bound, QUOTA_THROTTLE_MS_MAX);
        if ms > 0 {
            throttle::throttle(req, Kind::Fetch, ms);
            let frame = FetchReply::throttled(req.throttle_ms.response_ms())
                .encode(correlation_id, version);
            return Later(async move { frame }.boxed_local());
        }
        // Kafka: one response holds at most the quota's worth of a window.
        body.max_bytes = body.max_bytes.min(quota::window_bytes(*bound));
        body.min_bytes = body.min_bytes.min(body.max_bytes);
    }
    let (throttle_ms, conn, client) =
        (req.throttle_ms.clone(), req.conn.clone(), req.quota.clone());
    Later(
        async move {
            let (reply, grants) = respond(&shard, version, body, wanted).await;
            let mut frame = reply
                .with_throttle_time_ms(throttle_ms.response_ms())
                .encode(correlation_id, version);
            // The records' fetch memory is held until they are in the
            // frame. Not until it is written: a client that stops reading
            // would keep the shard's fetch bytes from every other one. The
            // frame's large batches keep their read buffers alive instead,
            // for as long as the connection's writer lets them (see
            // `rutomq_shards::response`).
            drop(grants);
            // The fetch quota counts the response's bytes; a response that
            // goes over it (or one of a request throttled otherwise) is
            // answered empty, and its bytes are taken back (Kafka's way).
            let bytes = frame.as_ref().map_or(0, |f| f.len()) as f64;
            if let Some((sensor, bound)) = &quota {
                let ms = sensor.record(bytes, *bound, QUOTA_THROTTLE_MS_MAX);
                throttle::apply(
                    client.as_deref(),
                    conn.as_ref(),
                    &throttle_ms,
                    Kind::Fetch,
                    ms,
                );
            }
            if throttle_ms.is_throttled() {
                if let Some((sensor, bound)) = &quota {
                    sensor.unrecord(bytes, *bound);
                }
                frame = FetchReply::throttled(throttle_ms.response_ms())
                    .encode(correlation_id, version);
            }
            frame
        }
        .boxed_local(),
    )
}

/// The topics asked for, resolved, each checked for READ (Kafka's
/// TOPIC_AUTHORIZATION_FAILED on each of its partitions when refused; a
/// topic asked by name is checked before it is known to exist).
async fn resolve(
    shard: &Shard,
    req: &Req,
    version: i16,
    topics: Vec<kafka_protocol::messages::fetch_request::FetchTopic>,
) -> Vec<Wanted> {
    let mut wanted = Vec::with_capacity(topics.len());
    for t in topics {
        let denied = || Err(ErrorCode::TopicAuthorizationFailed);
        let resolved = if version >= 13 {
            match shard.topics.by_id(t.topic_id).await {
                Ok(Some(rec)) if !allowed(shard, req, op::READ, resource::TOPIC, &rec.name) => {
                    denied()
                }
                other => other.map(|o| o.map(|r| (r.topic_id, r.partitions))),
            }
        } else if !allowed(shard, req, op::READ, resource::TOPIC, t.topic.0.as_str()) {
            denied()
        } else {
            shard
                .topics
                .by_name(t.topic.0.as_str())
                .await
                .map(|o| o.map(|r| (r.topic_id, r.partitions)))
        };
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes.max(0) as usize,
                )
            })
            .collect();
        wanted.push(Wanted {
            name: t.topic,
            topic_id: t.topic_id,
            resolved,
            partitions,
        });
    }
    wanted
}

/// The response, and the fetch memory its records hold (drop it once the
/// response is encoded).
async fn respond(
    shard: &Rc<Shard>,
    version: i16,
    body: FetchRequest,
    wanted: Vec<Wanted>,
) -> (FetchReply, Vec<FetchGrant>) {
    let mut grants = Vec::new();
    let tag: [u8; 8] = Uuid::new_v4().as_bytes()[..8].try_into().expect("8 bytes");
    let max_bytes = (body.max_bytes.max(0) as usize).min(FETCH_RESPONSE_BYTES_MAX);
    let min_bytes = body.min_bytes.max(0) as usize;
    let committed = body.isolation_level == 1;
    let deadline =
        Instant::now() + Duration::from_millis(body.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64);
    loop {
        // Register before reading, so a commit in between is not missed.
        let changed = shard.reader.watermarks.changed();
        // Admission by memory: a shard busy assembling other responses
        // answers with less data instead of growing.
        grants.clear();
        let (responses, records, total, errors) = read_all(
            shard,
            version,
            committed,
            &wanted,
            (max_bytes, min_bytes),
            &mut grants,
            &tag,
        )
        .await;
        let now = Instant::now();
        if total >= min_bytes
            || errors
            || now >= deadline
            || shard
                .agent
                .stopping
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return (FetchReply::new(responses, records, tag), grants);
        }
        let timer = Box::pin(rutomq_shards::sleep(deadline - now));
        match select(changed, timer).await {
            Either::Left(_) => continue,
            Either::Right(_) => {
                grants.clear();
                let (responses, records, _, _) = read_all(
                    shard,
                    version,
                    committed,
                    &wanted,
                    (max_bytes, min_bytes),
                    &mut grants,
                    &tag,
                )
                .await;
                return (FetchReply::new(responses, records, tag), grants);
            }
        }
    }
}

/// What one requested partition becomes before any data is read.
enum Slot {
    Ready(PartitionData),
    Read {
        data: PartitionData,
        topic_id: Uuid,
        fetch_offset: i64,
        grant: FetchGrant,
    },
}

/// Reads the partitions `wanted`, at most `max_bytes` in all: (responses,
/// their records, record bytes, whether any partition failed). Once the
/// reads done hold at least `min_bytes` (and some), partitions still
/// waiting for the object store are answered without records (see
/// [`Enough`]).
async fn read_all(
    shard: &Rc<Shard>,
    version: i16,
    committed: bool,
    wanted: &[Wanted],
    (max_bytes, min_bytes): (usize, usize),
    grants: &mut Vec<FetchGrant>,
    tag: &[u8; 8],
) -> (Vec<FetchableTopicResponse>, Vec<Records>, usize, bool) {
    // Plan every partition and reserve its memory in request order (a
    // shard busy assembling other responses answers with less data instead
    // of growing), then read all of them concurrently.
    let mut reserved = 0usize;
    let mut slots: Vec<Vec<Slot>> = Vec::with_capacity(wanted.len());
    for w in wanted {
        let mut parts = Vec::with_capacity(w.partitions.len());
        for &(partition, fetch_offset, partition_max) in &w.partitions {
            let data = PartitionData::default()
                .with_partition_index(partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_preferred_read_replica((-1).into());
            parts.push(match &w.resolved {
                Err(code) => Slot::Ready(data.with_error_code(code.code())),
                Ok(None) => Slot::Ready(
                    data.with_error_code(
                        if version >= 13 {
                            ErrorCode::UnknownTopicId
                        } else {
                            ErrorCode::UnknownTopicOrPartition
                        }
                        .code(),
                    ),
                ),
                Ok(Some((_, count))) if partition < 0 || partition >= *count => {
                    Slot::Ready(data.with_error_code(ErrorCode::UnknownTopicOrPartition.code()))
                }
                Ok(Some((topic_id, _))) => {
                    match caught_up(shard, committed, *topic_id, partition, fetch_offset) {
                        // Caught up: no need to ask PostgreSQL.
                        Some((hw, lso)) => Slot::Ready(
                            data.with_high_watermark(hw)
                                .with_last_stable_offset(lso)
                                .with_log_start_offset(0)
                                .with_aborted_transactions(committed.then(Vec::new))
                                .with_records(Some(bytes::Bytes::new())),
                        ),
                        _ => {
                            // Within its grant the first batch of a partition is
                            // returned whatever its size (consumers must progress).
                            let grant = shard
                                .fetch_budget
                                .reserve(partition_max.min(max_bytes.saturating_sub(reserved)));
                            reserved += grant.bytes;
                            if grant.bytes == 0 {
                                // Response full: report the partition without data.
                                Slot::Ready(data.with_records(Some(bytes::Bytes::new())))
                            } else {
                                Slot::Read {
                                    data,
                                    topic_id: *topic_id,
                                    fetch_offset,
                                    grant,
                                }
                            }
                        }
                    }
                }
            });
        }
        slots.push(parts);
    }
    // With one read nothing else can answer for it: no signal to make.
    let reading = slots
        .iter()
        .flatten()
        .filter(|slot| matches!(slot, Slot::Read { .. }))
        .count();
    let (mut told, enough) = if reading > 1 {
        let (told, enough) = Enough::new();
        (Some(told), Some(enough))
    } else {
        (None, None)
    };
    let mut running: FuturesUnordered<_> = slots
        .iter()
        .flatten()
        .filter_map(|slot| match slot {
            Slot::Read {
                data,
                topic_id,
                fetch_offset,
                grant,
            } => Some(shard.reader.read_partition(
                *topic_id,
                data.partition_index,
                *fetch_offset,
                grant.bytes,
                committed,
                false,
                enough.as_ref(),
            )),
            Slot::Ready(_) => None,
        })
        .enumerate()
        .map(|(i, read)| read.map(move |r| (i, r)))
        .collect();
    let mut reads: Vec<Option<Result<_, ErrorCode>>> = (0..running.len()).map(|_| None).collect();
    let mut gathered = 0usize;
    while let Some((i, read)) = running.next().await {
        if let Ok(r) = &read {
            gathered += r.records.len;
        }
        reads[i] = Some(read);
        if gathered >= min_bytes.max(1) && !running.is_empty() {
            if let Some(t) = told.take() {
                let _ = t.send(());
            }
        }
    }
    let mut reads = reads
        .into_iter()
        .map(|r| r.expect("every partition read answered"));
    let mut records = Vec::new();
    let mut total = 0usize;
    let mut errors = false;
    let mut responses = Vec::with_capacity(wanted.len());
    for (w, parts) in wanted.iter().zip(slots) {
        let mut out = Vec::with_capacity(parts.len());
        for slot in parts {
            let data = match slot {
                Slot::Ready(data) => data,
                Slot::Read {
                    data, mut grant, ..
                } => match reads.next().expect("one read per Slot::Read") {
                    Ok(read) => {
                        let len = read.records.len;
                        grant.shrink_to(len);
                        grants.push(grant);
                        total += len;
                        shard
                            .metrics
                            .fetch_bytes
                            .fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
                        // The records are spliced in at encoding, in place of
                        // a marker (large batches as they are, small ones
                        // copied into the frame).
                        let placeholder = if len == 0 {
                            bytes::Bytes::new()
                        } else {
                            records.push(read.records);
                            marker(tag, records.len() - 1)
                        };
                        let lso = if read.last_stable_offset >= 0 {
                            read.last_stable_offset
                        } else {
                            read.high_watermark
                        };
                        data.with_high_watermark(read.high_watermark)
                            .with_last_stable_offset(lso)
                            .with_log_start_offset(read.log_start_offset)
                            .with_aborted_transactions(read.aborted.map(|list| {
                                list.into_iter()
                                    .map(|(pid, first)| {
                                        AbortedTransaction::default()
                                            .with_producer_id(pid.into())
                                            .with_first_offset(first)
                                    })
                                    .collect()
                            }))
                            .with_records(Some(placeholder))
                    }
                    Err(code) => data.with_error_code(code.code()),
                },
            };
            if data.error_code != 0 {
                errors = true;
            }
            out.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(w.name.clone())
                .with_topic_id(match &w.resolved {
                    Ok(Some((id, _))) => *id,
                    _ => w.topic_id,
                })
                .with_partitions(out),
        );
    }
    (responses, records, total, errors)
}

/// (high watermark, last stable offset) when a fetch from `fetch_offset`
/// is known to find nothing new: at the high watermark, or for
/// read_committed at the last stable offset.
fn caught_up(
    shard: &Shard,
    committed: bool,
    topic_id: Uuid,
    partition: i32,
    fetch_offset: i64,
) -> Option<(i64, i64)> {
    let hw = shard.reader.watermarks.known(topic_id, partition)?;
    if !committed {
        return (hw == fetch_offset).then_some((hw, hw));
    }
    let lso = shard
        .reader
        .stable
        .last_stable(topic_id, partition, fetch_offset)?
        .min(hw);
    (lso == fetch_offset).then_some((hw, lso))
}
