//! Produce (key 0): validate each partition's batch, append it to the
//! shard's open buffer (in connection order), answer once the window that
//! holds it is uploaded and committed. acks=0 follows the same path without
//! a response.

use std::rc::Rc;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::{select, Either, FutureExt};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use rutomq_shards::ResponseFrame;

use super::access::allowed;
use super::{encode, str_bytes, throttle, Api, Later, Req};
use crate::error::ErrorCode;
use crate::flush::BufferDone;
use crate::limits::QUOTA_THROTTLE_MS_MAX;
use crate::quota::Kind;
use crate::records::validate_produce_records;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::topics;

/// Waits for a buffer's outcome, or gives up at `deadline`.
async fn wait(
    done: BufferDone,
    deadline: Option<Instant>,
) -> Option<<BufferDone as std::future::Future>::Output> {
    let Some(deadline) = deadline else {
        return Some(done.await);
    };
    let timer = Box::pin(rutomq_shards::sleep(
        deadline.saturating_duration_since(Instant::now()),
    ));
    match select(done, timer).await {
        Either::Left((outcome, _)) => Some(outcome),
        Either::Right(_) => None,
    }
}

enum Pending {
    Done(ErrorCode, Option<String>),
    /// Refused for some of its records (listed in it).
    BadRecords(crate::records::Invalid),
    /// Validated, not yet appended (pass 1).
    Valid {
        topic_id: uuid::Uuid,
        records: bytes::Bytes,
        info: crate::records::BatchInfo,
        /// The broker's timestamp (LogAppendTime topics), else -1.
        append_time: i64,
    },
    Appended {
        done: BufferDone,
        part: usize,
        batch: usize,
        append_time: i64,
    },
}

/// Produce, versions 3–13 (0–2 listed, see [`super::retired`]).
pub const API: Api<ProduceRequest> = Api::new(ApiKey::Produce, 3, 13).advertising_from(0);

pub async fn handle(shard: &Rc<Shard>, req: &Req, body: ProduceRequest) -> Later {
    let started = Instant::now();
    let (correlation_id, version) = (req.header.correlation_id, req.version);
    // The produce quota counts the request's bytes, as they arrive (the
    // records are still appended).
    if let Some((sensor, bound)) = throttle::sensor(req, Kind::Produce) {
        let ms = sensor.record(req.frame_bytes as f64, bound, QUOTA_THROTTLE_MS_MAX);
        throttle::throttle(req, Kind::Produce, ms);
    }
    let throttle_ms = req.throttle_ms.clone();
    let metrics = shard.metrics.clone();
    let acks = body.acks;
    // Kafka's produce timeout: past it the partition gets REQUEST_TIMED_OUT
    // (retriable; the batch may still commit, and an idempotent retry is
    // then answered with its original offsets). 0 or less: no limit.
    let deadline = (body.timeout_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(body.timeout_ms as u64));
    let acks_valid = matches!(acks, -1..=1);
    // One append time for the whole request, as Kafka takes one per append.
    let now_ms = crate::wall::now_ms();
    let mut topics_out = Vec::with_capacity(body.topic_data.len());
    let mut accepted_bytes = 0usize;
    // Kafka: a transactional producer needs WRITE on its transactional id
    // (else every partition is refused), and each topic WRITE.
    let txn_denied = body
        .transactional_id
        .as_ref()
        .is_some_and(|id| !allowed(shard, req, op::WRITE, resource::TRANSACTIONAL_ID, id));
    for t in body.topic_data {
        // By name before it is looked up (an unauthorized client learns
        // nothing of it and costs no lookup); by id once resolved.
        let mut denied = if txn_denied {
            Some(ErrorCode::TransactionalIdAuthorizationFailed)
        } else if req.version < 13
            && !allowed(shard, req, op::WRITE, resource::TOPIC, t.name.0.as_str())
        {
            Some(ErrorCode::TopicAuthorizationFailed)
        } else {
            None
        };
        let topic = match denied {
            Some(_) => Ok(None),
            None if req.version >= 13 => shard.topics.by_id(t.topic_id).await,
            None => shard.topics.by_name(t.name.0.as_str()).await,
        };
        if let (None, true, Ok(Some(rec))) = (denied, req.version >= 13, &topic) {
            if !allowed(shard, req, op::WRITE, resource::TOPIC, &rec.name) {
                denied = Some(ErrorCode::TopicAuthorizationFailed);
            }
        }
        // Once per topic: its configs' demands on the records.
        let ((rules, stamp), max_bytes) = match &topic {
            Ok(Some(rec)) => shard.configs.with(&shard.agent.dynamic.copy, |c| {
                let d = c.topic_defaults();
                (
                    topics::record_rules(rec, d, now_ms),
                    topics::max_message_bytes(rec, d),
                )
            }),
            _ => Default::default(), // unused: its partitions are refused
        };
        let mut parts = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let pending = match (&topic, acks_valid) {
                (_, false) => Pending::Done(ErrorCode::InvalidRequiredAcks, None),
                (_, true) if denied.is_some() => {
                    Pending::Done(denied.unwrap_or(ErrorCode::TopicAuthorizationFailed), None)
                }
                (Err(code), _) => Pending::Done(*code, None),
                (Ok(None), _) => Pending::Done(
                    if req.version >= 13 {
                        ErrorCode::UnknownTopicId
                    } else {
                        ErrorCode::UnknownTopicOrPartition
                    },
                    None,
                ),
                (Ok(Some(rec)), _) if p.index < 0 || p.index >= rec.partitions => {
                    Pending::Done(ErrorCode::UnknownTopicOrPartition, None)
                }
                (Ok(Some(rec)), _) => match p.records {
                    None => Pending::Done(ErrorCode::InvalidRecord, Some("no records".into())),
                    Some(records) => {
                        match validate_produce_records(&records, max_bytes, rules) {
                            Err(invalid) => {
                                metrics
                                    .produce_batches_rejected
                                    .fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(topic = %rec.name, partition = p.index, code = ?invalid.code,
                                    reason = %invalid.message, "produce refused records");
                                if invalid.records.is_empty() {
                                    Pending::Done(invalid.code, Some(invalid.message))
                                } else {
                                    Pending::BadRecords(invalid)
                                }
                            }
                            // Kafka: transactional records need the request's
                            // transactional id (and its authorization).
                            Ok(info) if info.transactional && body.transactional_id.is_none() => {
                                Pending::Done(
                                    ErrorCode::TransactionalIdAuthorizationFailed,
                                    Some("transactional records without a transactional id".into()),
                                )
                            }
                            Ok(mut info) => {
                                accepted_bytes += records.len();
                                let (records, append_time) = if stamp {
                                    info.max_timestamp = now_ms;
                                    (
                                        crate::records::stamp_log_append_time(&records, now_ms),
                                        now_ms,
                                    )
                                } else {
                                    (records, -1)
                                };
                                Pending::Valid {
                                    topic_id: rec.topic_id,
                                    records,
                                    info,
                                    append_time,
                                }
                            }
                        }
                    }
                },
            };
            parts.push((p.index, pending));
            // Validation decompresses; let other connections run.
            rutomq_shards::yield_if_needed().await;
        }
        topics_out.push((t.name, t.topic_id, parts));
    }
    // Pass 2, with no await: append in request order. Batches are slices of
    // the request frame and the tail cache keeps them; when they are a small
    // part of the frame (the rest rejected or padding), copy them so the
    // frame is not kept alive for their sake.
    let copy = accepted_bytes.saturating_mul(2) < req.frame_bytes;
    for (_, _, parts) in &mut topics_out {
        for (index, pending) in parts.iter_mut() {
            if let Pending::Valid { .. } = pending {
                let Pending::Valid {
                    topic_id,
                    records,
                    info,
                    append_time,
                } = std::mem::replace(pending, Pending::Done(ErrorCode::None, None))
                else {
                    unreachable!("matched above")
                };
                let records = if copy {
                    bytes::Bytes::copy_from_slice(&records)
                } else {
                    records
                };
                metrics.produce_batches.fetch_add(1, Ordering::Relaxed);
                metrics
                    .produce_bytes
                    .fetch_add(records.len() as u64, Ordering::Relaxed);
                let (done, part, batch) = shard.buffer.append(topic_id, *index, records, &info);
                *pending = Pending::Appended {
                    done,
                    part,
                    batch,
                    append_time,
                };
            }
        }
    }
    shard.buffer.appended();
    let answer = async move {
        let mut responses = Vec::with_capacity(topics_out.len());
        for (name, topic_id, parts) in topics_out {
            let mut partition_responses = Vec::with_capacity(parts.len());
            for (index, pending) in parts {
                let r = PartitionProduceResponse::default()
                    .with_index(index)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1)
                    .with_log_start_offset(-1);
                let r = match pending {
                    Pending::Valid { .. } => unreachable!("appended in pass 2"),
                    Pending::Done(code, msg) => r
                        .with_error_code(code.code())
                        .with_error_message(msg.as_deref().map(str_bytes)),
                    Pending::BadRecords(invalid) => {
                        let r = r
                            .with_error_code(invalid.code.code())
                            .with_error_message(Some(str_bytes(&invalid.message)));
                        if version >= 8 {
                            let why = str_bytes(invalid.record_message);
                            r.with_record_errors(
                                invalid
                                    .records
                                    .into_iter()
                                    .map(|i| {
                                        BatchIndexAndErrorMessage::default()
                                            .with_batch_index(i)
                                            .with_batch_index_error_message(Some(why.clone()))
                                    })
                                    .collect(),
                            )
                        } else {
                            r
                        }
                    }
                    Pending::Appended {
                        done,
                        part,
                        batch,
                        append_time,
                    } => match wait(done, deadline).await {
                        None => r
                            .with_error_code(ErrorCode::RequestTimedOut.code())
                            .with_error_message(Some(str_bytes(
                                "not durable within timeout_ms; it may still be committed",
                            ))),
                        Some(Ok(Ok(outcome))) => {
                            let part = &outcome[part];
                            let r = r.with_log_start_offset(part.log_start_offset);
                            match part.batches[batch] {
                                rutomq_meta::BatchOutcome::Appended { base_offset }
                                | rutomq_meta::BatchOutcome::Duplicate { base_offset } => r
                                    .with_base_offset(base_offset)
                                    .with_log_append_time_ms(append_time),
                                other => r.with_error_code(produce_error(other, version).code()),
                            }
                        }
                        Some(Ok(Err(code))) => r.with_error_code(code.code()),
                        Some(Err(_)) => r.with_error_code(ErrorCode::KafkaStorageError.code()),
                    },
                };
                partition_responses.push(r);
            }
            responses.push(
                TopicProduceResponse::default()
                    .with_name(name)
                    .with_topic_id(topic_id)
                    .with_partition_responses(partition_responses),
            );
        }
        metrics.observe_produce(started.elapsed());
        (acks != 0).then(|| {
            ProduceResponse::default()
                .with_responses(responses)
                .with_throttle_time_ms(throttle_ms.response_ms())
        })
    }
    .map(move |resp| {
        resp.and_then(|r| encode(correlation_id, version, &r))
            .map(ResponseFrame::from)
    });
    Later(answer.boxed_local())
}

/// A refused batch's error as Kafka answers it at this request version: a
/// transactional batch outside its open transaction is INVALID_TXN_STATE
/// for clients before KIP-890 (v10 and lower), TRANSACTION_ABORTABLE after.
fn produce_error(outcome: rutomq_meta::BatchOutcome, version: i16) -> ErrorCode {
    use rutomq_meta::BatchOutcome as B;
    match outcome {
        B::InvalidTxnState if version >= 11 => ErrorCode::TransactionAbortable,
        B::PlainBatchInTransaction => {
            tracing::info!(
                "non-transactional batch refused: its producer id has a transaction open in the partition"
            );
            ErrorCode::InvalidTxnState
        }
        other => ErrorCode::from(other),
    }
}
