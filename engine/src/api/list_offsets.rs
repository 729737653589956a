//! ListOffsets (key 2): earliest, latest, by timestamp, max timestamp.

use kafka_protocol::messages::ApiKey;
use rutomq_meta::SpanRecord;
use uuid::Uuid;

use super::access::allowed;
use super::generated::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use super::generated::{ListOffsetsRequest, ListOffsetsResponse};
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::records::first_record_matching;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
/// KIP-1023's first offset not yet in remote storage: there is none (a
/// record is in the object store before it is acknowledged), so no offset
/// is found, as Kafka answers for a topic without tiered storage.
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// ListOffsets, versions 1–11 (codec generated from Kafka 4.3's spec).
pub const API: Api<ListOffsetsRequest> = Api::new(ApiKey::ListOffsets, 1, 11);

/// The first version that may ask for `target` (Kafka refuses a sentinel
/// from an older version with UNSUPPORTED_VERSION; clients downgrade only
/// as far as what they ask allows).
fn min_version(target: i64) -> i16 {
    match target {
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL => 8,
        LATEST_TIERED => 9,
        EARLIEST_PENDING_UPLOAD => 11,
        _ => 0,
    }
}

pub async fn handle(shard: &Shard, req: &Req, body: ListOffsetsRequest) -> ListOffsetsResponse {
    // leader_epoch exists from v4; setting it earlier fails the encoding.
    let leader_epoch = if req.version >= 4 {
        crate::topics::LEADER_EPOCH
    } else {
        -1
    };
    let committed = body.isolation_level == 1;
    let mut topics = Vec::new();
    for t in body.topics {
        // Kafka: DESCRIBE on the topic, checked before it is known to exist.
        let topic = if allowed(shard, req, op::DESCRIBE, resource::TOPIC, &t.name) {
            shard.topics.by_name(t.name.0.as_str()).await
        } else {
            Err(ErrorCode::TopicAuthorizationFailed)
        };
        // A topic's partitions looked up together: the metadata thread
        // pipelines their queries instead of one round trip after another.
        let parts = futures::future::join_all(t.partitions.into_iter().map(|p| {
            let topic = &topic;
            async move {
                let r = ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_timestamp(-1)
                    .with_offset(-1)
                    .with_leader_epoch(leader_epoch);
                let found = match topic {
                    _ if req.version < min_version(p.timestamp) => {
                        Err(ErrorCode::UnsupportedVersion)
                    }
                    Err(code) => Err(*code),
                    Ok(None) => Err(ErrorCode::UnknownTopicOrPartition),
                    Ok(Some(rec))
                        if p.partition_index < 0 || p.partition_index >= rec.partitions =>
                    {
                        Err(ErrorCode::UnknownTopicOrPartition)
                    }
                    Ok(Some(rec)) => {
                        lookup(
                            shard,
                            rec.topic_id,
                            p.partition_index,
                            p.timestamp,
                            committed,
                        )
                        .await
                    }
                };
                match found {
                    Ok(Some((offset, ts))) => r.with_offset(offset).with_timestamp(ts),
                    Ok(None) => r,
                    Err(code) => r.with_error_code(code.code()),
                }
            }
        }))
        .await;
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// (offset, timestamp) for a ListOffsets target, or None when no record
/// matches (Kafka answers offset -1).
async fn lookup(
    shard: &Shard,
    topic_id: Uuid,
    partition: i32,
    target: i64,
    committed: bool,
) -> Result<Option<(i64, i64)>, ErrorCode> {
    let meta = &shard.agent.meta;
    let offsets = meta
        .partition_offsets(topic_id, partition)
        .await
        .map_err(|e| ErrorCode::from(&e))?
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    match target {
        // read_committed (v2+): the latest offset is the last stable one.
        LATEST | LATEST_TIERED if committed => Ok(Some((offsets.last_stable_offset, -1))),
        LATEST | LATEST_TIERED => Ok(Some((offsets.high_watermark, -1))),
        EARLIEST | EARLIEST_LOCAL => Ok(Some((offsets.log_start_offset, -1))),
        EARLIEST_PENDING_UPLOAD => Ok(None),
        MAX_TIMESTAMP => {
            let span = meta
                .span_by_timestamp(topic_id, partition, None, 0)
                .await
                .map_err(|e| ErrorCode::from(&e))?;
            match span {
                None => Ok(None),
                Some(s) => {
                    let max = s.max_timestamp;
                    find_record(shard, &s, offsets.log_start_offset, |ts| ts == max).await
                }
            }
        }
        ts if ts >= 0 => {
            // The first span with a late enough record; when DeleteRecords
            // put the log start inside it and its hits are all before the
            // log start, the next such span. Batch max timestamps are the
            // records' own (checked on produce), so a later span always
            // holds a hit: two spans at most.
            let mut from = offsets.log_start_offset;
            for _ in 0..2 {
                let span = meta
                    .span_by_timestamp(topic_id, partition, Some(ts), from)
                    .await
                    .map_err(|e| ErrorCode::from(&e))?;
                let Some(s) = span else { return Ok(None) };
                let found =
                    find_record(shard, &s, offsets.log_start_offset, |rts| rts >= ts).await?;
                if found.is_some() {
                    return Ok(found);
                }
                from = s.last_offset + 1;
            }
            Ok(None)
        }
        _ => Err(ErrorCode::InvalidRequest),
    }
}

/// The first record in `span` at or after offset `from` whose timestamp
/// satisfies `hit`.
async fn find_record(
    shard: &Shard,
    span: &SpanRecord,
    from: i64,
    hit: impl Fn(i64) -> bool,
) -> Result<Option<(i64, i64)>, ErrorCode> {
    // Checked: the answer comes from the batches' timestamps.
    for rb in shard.reader.read_span(span, true).await? {
        // A batch whose newest timestamp misses holds no hit (both targets
        // are "at least" or "equal to the span's newest").
        let last = rb.base_offset + rb.batch.last_offset_delta as i64;
        if last < from || !hit(rb.batch.max_timestamp) {
            continue;
        }
        let found = first_record_matching(&rb.batch.bytes, rb.base_offset, |offset, ts| {
            offset >= from && hit(ts)
        })
        .map_err(|_| ErrorCode::KafkaStorageError)?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}
