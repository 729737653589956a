//! The native producer's retry ordering rule, against a scripted broker on
//! a local socket that delays its answers (so several Produce requests are
//! in flight) and fails one response in the middle of the pipeline with a
//! retriable error. Checked: after the failure nothing new is issued until
//! every response already issued has settled; the failed batches then go
//! out again, alone and in their original order, before any newer batch;
//! each partition's records land exactly once and in send order.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use datum_mq::batch::decode_batches;
use datum_mq::{KafkaProducer, KafkaProducerBackend, KafkaProducerSettings, ProducerRecord};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, BrokerId, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PARTITIONS: i32 = 4;
/// The Produce request (1-based) answered with NOT_LEADER_OR_FOLLOWER.
const FAILED_REQUEST: usize = 3;
const ANSWER_DELAY: Duration = Duration::from_millis(30);
/// Requests that arrive right after the failing one are answered this much
/// later still: a producer that did not wait for them to settle would retry
/// (or issue newer batches) meanwhile.
const HOLD_AFTER_FAILURE: Duration = Duration::from_millis(150);

/// What the broker saw of one Produce request.
#[derive(Debug, Clone)]
struct Seen {
    index: usize,
    /// Requests received and not yet answered when this one arrived.
    outstanding: usize,
    /// partition -> record values, in the order the request carried them.
    batches: Vec<(i32, Vec<String>)>,
    failed: bool,
    arrived: tokio::time::Instant,
}

#[derive(Default)]
struct Log {
    seen: Vec<Seen>,
    answered: usize,
    /// partition -> values appended (answered without error).
    appended: BTreeMap<i32, Vec<String>>,
    next_offset: BTreeMap<i32, i64>,
    failure_answered: Option<tokio::time::Instant>,
}

fn encode_response<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    body: &R,
) -> Bytes {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let hv = R::header_version(version);
    let mut b = BytesMut::new();
    b.put_i32(0);
    header.encode(&mut b, hv).unwrap();
    body.encode(&mut b, version).unwrap();
    let len = (b.len() - 4) as i32;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.freeze()
}

async fn serve(listener: TcpListener, port: u16, log: Arc<Mutex<Log>>) {
    loop {
        let (sock, _) = listener.accept().await.unwrap();
        let log = log.clone();
        tokio::spawn(async move {
            let (mut r, mut w) = sock.into_split();
            // (when due, frame, Produce request index or 0)
            let (tx, mut rx) =
                tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Bytes, usize)>();
            let wlog = log.clone();
            tokio::spawn(async move {
                while let Some((due, frame, index)) = rx.recv().await {
                    tokio::time::sleep_until(due).await;
                    if index > 0 {
                        let mut l = wlog.lock().unwrap();
                        l.answered += 1;
                        if index == FAILED_REQUEST {
                            l.failure_answered = Some(tokio::time::Instant::now());
                        }
                    }
                    if w.write_all(&frame).await.is_err() {
                        return;
                    }
                }
            });
            loop {
                let Ok(size) = r.read_i32().await else { return };
                let mut buf = vec![0u8; size as usize];
                if r.read_exact(&mut buf).await.is_err() {
                    return;
                }
                let key = i16::from_be_bytes([buf[0], buf[1]]);
                let version = i16::from_be_bytes([buf[2], buf[3]]);
                let mut body = Bytes::from(buf);
                let now = tokio::time::Instant::now();
                match key {
                    18 => {
                        let h = RequestHeader::decode(
                            &mut body,
                            ApiVersionsRequest::header_version(version),
                        )
                        .unwrap();
                        let resp = ApiVersionsResponse::default().with_api_keys(vec![
                            ApiVersion::default()
                                .with_api_key(0)
                                .with_min_version(3)
                                .with_max_version(9),
                            ApiVersion::default()
                                .with_api_key(3)
                                .with_min_version(0)
                                .with_max_version(12),
                            ApiVersion::default()
                                .with_api_key(18)
                                .with_min_version(0)
                                .with_max_version(3),
                        ]);
                        tx.send((now, encode_response(h.correlation_id, version, &resp), 0))
                            .unwrap();
                    }
                    3 => {
                        let h = RequestHeader::decode(
                            &mut body,
                            MetadataRequest::header_version(version),
                        )
                        .unwrap();
                        let partitions = (0..PARTITIONS)
                            .map(|p| {
                                MetadataResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_leader_id(BrokerId(0))
                            })
                            .collect();
                        let resp = MetadataResponse::default()
                            .with_brokers(vec![MetadataResponseBroker::default()
                                .with_node_id(BrokerId(0))
                                .with_host(StrBytes::from_static_str("127.0.0.1"))
                                .with_port(i32::from(port))])
                            .with_topics(vec![MetadataResponseTopic::default()
                                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                                .with_partitions(partitions)]);
                        tx.send((now, encode_response(h.correlation_id, version, &resp), 0))
                            .unwrap();
                    }
                    0 => {
                        let h = RequestHeader::decode(
                            &mut body,
                            ProduceRequest::header_version(version),
                        )
                        .unwrap();
                        let req = ProduceRequest::decode(&mut body, version).unwrap();
                        let mut l = log.lock().unwrap();
                        let index = l.seen.len() + 1;
                        let outstanding = (index - 1) - l.answered;
                        let failed = index == FAILED_REQUEST;
                        let mut batches = Vec::new();
                        let mut topic_resp = TopicProduceResponse::default()
                            .with_name(TopicName(StrBytes::from_static_str("t")));
                        for t in &req.topic_data {
                            for p in &t.partition_data {
                                let mut recs = Vec::new();
                                decode_batches(p.records.clone().unwrap(), 0, &mut recs).unwrap();
                                let values: Vec<String> = recs
                                    .iter()
                                    .map(|r| {
                                        String::from_utf8(r.value.clone().unwrap().to_vec())
                                            .unwrap()
                                    })
                                    .collect();
                                let mut pr =
                                    PartitionProduceResponse::default().with_index(p.index);
                                if failed {
                                    pr = pr.with_error_code(6); // NOT_LEADER_OR_FOLLOWER
                                } else {
                                    let next = l.next_offset.entry(p.index).or_insert(0);
                                    pr = pr.with_base_offset(*next);
                                    *next += values.len() as i64;
                                    l.appended
                                        .entry(p.index)
                                        .or_default()
                                        .extend(values.iter().cloned());
                                }
                                topic_resp.partition_responses.push(pr);
                                batches.push((p.index, values));
                            }
                        }
                        l.seen.push(Seen {
                            index,
                            outstanding,
                            batches,
                            failed,
                            arrived: now,
                        });
                        drop(l);
                        let resp = ProduceResponse::default().with_responses(vec![topic_resp]);
                        let held = if index > FAILED_REQUEST && index <= FAILED_REQUEST + 4 {
                            HOLD_AFTER_FAILURE
                        } else {
                            Duration::ZERO
                        };
                        tx.send((
                            now + ANSWER_DELAY + held,
                            encode_response(h.correlation_id, version, &resp),
                            index,
                        ))
                        .unwrap();
                    }
                    other => panic!("unexpected API {other}"),
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_response_halts_settles_and_retries_in_order_first() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Log::default()));
    tokio::spawn(serve(listener, port, log.clone()));
    let p = KafkaProducer::new(
        KafkaProducerSettings::new(format!("127.0.0.1:{port}"))
            .with_backend(KafkaProducerBackend::Native)
            .with_max_in_flight_requests_per_connection(5)
            .with_batch_size_bytes(1024)
            .with_linger(Duration::from_millis(1))
            .with_retry_backoff(Duration::from_millis(5)),
    )
    .await
    .unwrap();
    // Ten records (about one batch) per partition in turn, a little apart:
    // batches close at different times, so requests for different
    // partitions overlap (one partition's never do).
    let mut deliveries = Vec::new();
    let mut next = [0usize; PARTITIONS as usize];
    for i in 0..400 {
        let part = (i / 10) % PARTITIONS;
        let n = next[part as usize];
        next[part as usize] += 1;
        let r = ProducerRecord::new("t")
            .with_partition(part)
            .with_value(format!("p{part}-{n:05}-{}", "x".repeat(90)));
        deliveries.push(p.send(r).await.unwrap());
        if i % 10 == 9 {
            tokio::time::sleep(Duration::from_millis(4)).await;
        }
    }
    for d in deliveries {
        d.await.unwrap();
    }
    let l = log.lock().unwrap();
    let failed = l
        .seen
        .iter()
        .find(|s| s.failed)
        .expect("the scripted failure happened");
    assert!(
        failed.outstanding > 0
            || l.seen
                .iter()
                .any(|s| s.index > failed.index && s.outstanding > 0),
        "several requests were in flight: {:?}",
        l.seen.iter().map(|s| s.outstanding).collect::<Vec<_>>()
    );
    // Requests issued before the failure was known may still arrive; the
    // retry is the first request that repeats a failed batch.
    let retry = l
        .seen
        .iter()
        .find(|s| s.index > failed.index && s.batches.iter().any(|b| failed.batches.contains(b)))
        .expect("the failed batches were retried");
    assert_eq!(
        retry.outstanding, 0,
        "retried only after every issued response settled"
    );
    assert_eq!(
        retry.batches, failed.batches,
        "the failed batches, alone, in their order"
    );
    // Nothing new between the failure and the retry: what arrived in
    // between was sent before the failure was known (the others were held
    // back far longer than that).
    let failure_answered = l.failure_answered.expect("answered");
    for s in l
        .seen
        .iter()
        .filter(|s| s.index > failed.index && s.index < retry.index)
    {
        assert!(
            s.arrived < failure_answered + Duration::from_millis(10),
            "request {} went out {:?} after the failure and before the retry",
            s.index,
            s.arrived - failure_answered
        );
    }
    assert!(
        retry.arrived >= failure_answered + HOLD_AFTER_FAILURE,
        "the retry waited for the held responses"
    );
    // Exactly once, in send order, per partition.
    for part in 0..PARTITIONS {
        let got = &l.appended[&part];
        let want: Vec<String> = (0..100)
            .map(|i| format!("p{part}-{i:05}-{}", "x".repeat(90)))
            .collect();
        assert_eq!(got, &want, "partition {part}");
    }
}
