//! Fetch (key 1): exact byte ranges of committed spans, base offsets
//! patched, long-poll on high-watermark notifications (local commits and
//! LISTEN/NOTIFY from other agents) up to `max_wait_ms`.
//!
//! Fetch sessions are answered sessionless (session id 0, full responses
//! holding every requested partition), which every client handles.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use futures::future::{select, Either};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use uuid::Uuid;

use super::Req;
use crate::error::ErrorCode;
use crate::read::{read_partition, Records};
use crate::shard::{FetchGrant, Shard};

/// Longest long poll honoured.
pub const FETCH_WAIT_MS_MAX: i32 = 60_000;
/// Largest response assembled, whatever the client asks.
pub const FETCH_RESPONSE_BYTES_MAX: usize = 64 << 20;

struct Wanted {
    name: TopicName,
    topic_id: Uuid,
    resolved: Result<Option<(Uuid, i32)>, ErrorCode>,
    partitions: Vec<(i32, i64, usize)>,
}

/// The response, and the fetch memory its records hold (drop it once the
/// response is encoded).
pub async fn handle(
    shard: &Rc<Shard>,
    req: &Req,
    body: FetchRequest,
) -> (FetchReply, Vec<FetchGrant>) {
    let mut grants = Vec::new();
    let tag: [u8; 8] = Uuid::new_v4().as_bytes()[..8].try_into().expect("8 bytes");
    let mut wanted = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        let resolved = if req.version >= 13 {
            shard.topic_by_id(t.topic_id).await
        } else {
            shard.topic_by_name(t.topic.0.as_str()).await
        }
        .map(|o| o.map(|r| (r.topic_id, r.partitions)));
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
    let max_bytes = (body.max_bytes.max(0) as usize).min(FETCH_RESPONSE_BYTES_MAX);
    let min_bytes = body.min_bytes.max(0) as usize;
    let deadline =
        Instant::now() + Duration::from_millis(body.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64);
    loop {
        // Register before reading, so a commit in between is not missed.
        let changed = shard.watermark_changed();
        // Admission by memory: a shard busy assembling other responses
        // answers with less data instead of growing.
        grants.clear();
        let (responses, records, total, errors) =
            read_all(shard, req.version, &wanted, max_bytes, &mut grants, &tag).await;
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
                let (responses, records, _, _) =
                    read_all(shard, req.version, &wanted, max_bytes, &mut grants, &tag).await;
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

async fn read_all(
    shard: &Rc<Shard>,
    version: i16,
    wanted: &[Wanted],
    max_bytes: usize,
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
                Ok(Some((topic_id, _))) => match shard.known_watermark(*topic_id, partition) {
                    // Caught up: no need to ask PostgreSQL.
                    Some(hw) if hw == fetch_offset => Slot::Ready(
                        data.with_high_watermark(hw)
                            .with_last_stable_offset(hw)
                            .with_log_start_offset(0)
                            .with_records(Some(bytes::Bytes::new())),
                    ),
                    _ => {
                        // Within its grant the first batch of a partition is
                        // returned whatever its size (consumers must progress).
                        let grant = shard.reserve_fetch_bytes(
                            partition_max.min(max_bytes.saturating_sub(reserved)),
                        );
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
                },
            });
        }
        slots.push(parts);
    }
    let reads = futures::future::join_all(slots.iter().flatten().filter_map(|slot| match slot {
        Slot::Read {
            data,
            topic_id,
            fetch_offset,
            grant,
        } => Some(read_partition(
            shard,
            *topic_id,
            data.partition_index,
            *fetch_offset,
            grant.bytes,
        )),
        Slot::Ready(_) => None,
    }))
    .await;
    let mut reads = reads.into_iter();
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
                        // a marker (one copy, straight into the frame).
                        let placeholder = if len == 0 {
                            bytes::Bytes::new()
                        } else {
                            records.push(read.records);
                            marker(tag, records.len() - 1)
                        };
                        data.with_high_watermark(read.high_watermark)
                            .with_last_stable_offset(read.high_watermark)
                            .with_log_start_offset(read.log_start_offset)
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

const MARKER_BYTES: usize = 16;

/// The placeholder of record set `i`: the response's random tag and `i`.
fn marker(tag: &[u8; 8], i: usize) -> bytes::Bytes {
    let mut m = Vec::with_capacity(MARKER_BYTES);
    m.extend_from_slice(tag);
    m.extend_from_slice(&(i as u64).to_be_bytes());
    bytes::Bytes::from(m)
}

/// A Fetch response whose record sets are still separate.
pub struct FetchReply {
    resp: FetchResponse,
    records: Vec<Records>,
    tag: [u8; 8],
}

impl FetchReply {
    fn new(
        responses: Vec<FetchableTopicResponse>,
        records: Vec<Records>,
        tag: [u8; 8],
    ) -> FetchReply {
        FetchReply {
            resp: FetchResponse::default()
                .with_session_id(0)
                .with_responses(responses),
            records,
            tag,
        }
    }

    /// The response frame: encoded with a small marker in place of each
    /// record set, then copied once with the record sets (base offsets
    /// patched) written where their markers and length prefixes were.
    pub fn encode(&self, correlation_id: i32, version: i16) -> Option<bytes::Bytes> {
        let frame = super::encode(correlation_id, version, &self.resp)?;
        if self.records.is_empty() {
            return Some(frame);
        }
        // Records are COMPACT_RECORDS (uvarint length + 1) from v12, else
        // an int32 length.
        let flexible = version >= 12;
        let prefix: &[u8] = if flexible {
            &[MARKER_BYTES as u8 + 1]
        } else {
            &[0, 0, 0, MARKER_BYTES as u8]
        };
        let total: usize = self.records.iter().map(|r| r.len).sum();
        let mut out = BytesMut::with_capacity(frame.len() + total);
        let mut pos = 0;
        for (i, records) in self.records.iter().enumerate() {
            let index = (i as u64).to_be_bytes();
            let is_marker = |w: &[u8]| w[..8] == self.tag && w[8..] == index;
            let Some(found) = frame[pos..].windows(MARKER_BYTES).position(is_marker) else {
                tracing::error!(i, "fetch record marker missing from the encoded response");
                return None;
            };
            let at = pos + found;
            let Some(len_at) = at
                .checked_sub(prefix.len())
                .filter(|&l| &frame[l..at] == prefix)
            else {
                tracing::error!(i, "fetch record marker without its length prefix");
                return None;
            };
            out.extend_from_slice(&frame[pos..len_at]);
            if flexible {
                put_uvarint(&mut out, records.len as u64 + 1);
            } else {
                out.put_i32(records.len as i32);
            }
            records.write_to(&mut out);
            pos = at + MARKER_BYTES;
        }
        out.extend_from_slice(&frame[pos..]);
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        Some(out.freeze())
    }
}

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    fn batch(n: u8, len: usize) -> bytes::Bytes {
        let mut b = vec![n; len];
        b[..8].copy_from_slice(&0i64.to_be_bytes());
        bytes::Bytes::from(b)
    }

    /// The spliced frame equals kafka-protocol's encoding of the same
    /// response with the records in place, at every served version.
    #[test]
    fn spliced_records_encode_like_the_library() {
        let tag = *b"tagtagta";
        let sets = [
            vec![(5i64, batch(1, 70)), (9, batch(2, 200))],
            vec![(100, batch(3, 130))],
        ];
        for version in 4..=18 {
            let mut records = Vec::new();
            let mut direct = Vec::new();
            let mut spliced = Vec::new();
            for (p, set) in sets.iter().enumerate() {
                let mut r = Records::default();
                let mut bytes = BytesMut::new();
                for (base, b) in set {
                    r.push(*base, b.clone());
                    crate::records::put_with_base_offset(&mut bytes, b, *base);
                }
                let data = PartitionData::default()
                    .with_partition_index(p as i32)
                    .with_high_watermark(200);
                direct.push(data.clone().with_records(Some(bytes.freeze())));
                records.push(r);
                spliced.push(data.with_records(Some(marker(&tag, p))));
            }
            // A partition without data stays as it is.
            let empty = PartitionData::default()
                .with_partition_index(7)
                .with_records(Some(bytes::Bytes::new()));
            direct.push(empty.clone());
            spliced.push(empty);
            let topic = |parts| {
                vec![FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_static_str("t")))
                    .with_topic_id(Uuid::from_u128(7))
                    .with_partitions(parts)]
            };
            let want = super::super::encode(
                3,
                version,
                &FetchResponse::default().with_responses(topic(direct)),
            )
            .unwrap();
            let got = FetchReply::new(topic(spliced), records, tag)
                .encode(3, version)
                .unwrap();
            assert_eq!(got, want, "version {version}");
        }
    }
}
