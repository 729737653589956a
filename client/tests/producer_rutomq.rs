//! The producer backends (native, and rdkafka when built with it) against a
//! real rutomq agent (with its own PostgreSQL) over TCP: keyed records land
//! on the partition Kafka's Java partitioner picks, keyless ones (native) go in
//! sticky batches that move across partitions, LZ4 and Zstd batches are
//! accepted and read back, pipelined requests keep each partition's order, and a SIGKILLed agent costs no
//! acknowledged record. Every check reads the partitions back with raw
//! Fetch requests and compares each acknowledged record at its offset.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use datum_mq::batch::{decode_batches, Record};
use datum_mq::native::connect;
use datum_mq::partitioner::partition_for_key;
use datum_mq::{
    Compression, KafkaProducer, KafkaProducerBackend, KafkaProducerSettings, ProducerRecord,
    RecordMetadata, Security,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const PARTITIONS: i32 = 8;

fn settings(agent: &common::Agent) -> KafkaProducerSettings {
    KafkaProducerSettings::new(agent.bootstrap.clone()).with_backend(KafkaProducerBackend::Native)
}

/// The backends this build has.
fn backends() -> Vec<KafkaProducerBackend> {
    let mut b = vec![KafkaProducerBackend::Native];
    if cfg!(feature = "rdkafka") {
        b.push(KafkaProducerBackend::Rdkafka);
    }
    b
}

/// Every record of `topic`-`partition` from offset 0.
async fn read_partition(bootstrap: &str, topic: &str, partition: i32) -> Vec<Record> {
    let conn = connect(
        bootstrap,
        &Security::Plaintext,
        "reader",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    let mut offset = 0i64;
    loop {
        let req = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(100)
            .with_max_bytes(8 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(4 << 20)])]);
        let resp = conn.call(&req, (4, 12)).await.unwrap();
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition} at {offset}");
        let next = decode_batches(p.records.clone().unwrap_or_default(), offset, &mut out).unwrap();
        if let Some(n) = next {
            offset = n;
        }
        if offset >= p.high_watermark {
            return out;
        }
    }
}

/// Checks that each acknowledged record is in the log at its offset with
/// its value; returns the records read per partition.
async fn verify_acknowledged(
    bootstrap: &str,
    topic: &str,
    acked: &[(Bytes, RecordMetadata)],
) -> BTreeMap<i32, Vec<Record>> {
    let mut log = BTreeMap::new();
    for p in 0..PARTITIONS {
        log.insert(p, read_partition(bootstrap, topic, p).await);
    }
    let index: HashMap<(i32, i64), &Record> = log
        .iter()
        .flat_map(|(p, recs)| recs.iter().map(move |r| ((*p, r.offset), r)))
        .collect();
    for (value, md) in acked {
        let r = index
            .get(&(md.partition, md.offset))
            .unwrap_or_else(|| panic!("acknowledged {md:?} not in the log"));
        assert_eq!(r.value.as_ref(), Some(value), "{md:?}");
    }
    log
}

async fn send_all(p: &KafkaProducer, records: Vec<ProducerRecord>) -> Vec<(Bytes, RecordMetadata)> {
    let mut pending = Vec::new();
    for r in records {
        let v = r.value.clone().unwrap();
        pending.push((v, p.send(r).await.unwrap()));
    }
    let mut out = Vec::new();
    for (v, d) in pending {
        out.push((v, d.await.unwrap()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_land_on_kafkas_partitions_and_read_back() {
    let agent = common::Agent::start(&["--default-partitions", "8"]);
    for backend in backends() {
        let topic = format!("keyed-{backend:?}");
        let p = KafkaProducer::new(settings(&agent).with_backend(backend))
            .await
            .unwrap();
        assert_eq!(p.backend(), backend);
        let records: Vec<ProducerRecord> = (0..5000)
            .map(|i| {
                ProducerRecord::new(&topic)
                    .with_key(format!("key-{}", i % 700))
                    .with_value(format!("value-{i}"))
                    .with_header("n", Some(Bytes::from(i.to_string())))
            })
            .collect();
        let keys: Vec<Bytes> = records.iter().map(|r| r.key.clone().unwrap()).collect();
        let acked = send_all(&p, records).await;
        for ((_, md), key) in acked.iter().zip(&keys) {
            assert_eq!(md.partition, partition_for_key(key, PARTITIONS), "{key:?}");
        }
        // Per key, offsets follow the send order.
        let mut last: HashMap<&Bytes, i64> = HashMap::new();
        for ((_, md), key) in acked.iter().zip(&keys) {
            if let Some(prev) = last.insert(key, md.offset) {
                assert!(md.offset > prev, "{key:?}");
            }
        }
        let log = verify_acknowledged(&agent.bootstrap, &topic, &acked).await;
        assert_eq!(
            log.values().map(Vec::len).sum::<usize>(),
            5000,
            "nothing else in the log"
        );
        let first = &log[&acked[0].1.partition][0];
        assert_eq!(
            first.headers,
            vec![("n".to_string(), Some(Bytes::from("0")))]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_go_in_sticky_batches_across_partitions() {
    let agent = common::Agent::start(&["--default-partitions", "8"]);
    let p = KafkaProducer::new(
        settings(&agent)
            .with_batch_size_bytes(16 << 10)
            .with_linger(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    let records: Vec<ProducerRecord> = (0..4000)
        .map(|i| ProducerRecord::new("keyless").with_value(vec![(i % 251) as u8; 1000]))
        .collect();
    let acked = send_all(&p, records).await;
    // Runs of consecutive records on one partition: whole batches (about
    // 15 records of 1 KB in 16 KiB), moving on round-robin.
    let mut runs = vec![1usize];
    for w in acked.windows(2) {
        if w[0].1.partition == w[1].1.partition {
            *runs.last_mut().unwrap() += 1;
        } else {
            assert_eq!(
                w[1].1.partition,
                (w[0].1.partition + 1) % PARTITIONS,
                "round-robin"
            );
            runs.push(1);
        }
    }
    let used: std::collections::HashSet<i32> = acked.iter().map(|a| a.1.partition).collect();
    assert_eq!(
        used.len(),
        PARTITIONS as usize,
        "every partition gets batches"
    );
    let mean = acked.len() as f64 / runs.len() as f64;
    assert!(
        mean >= 10.0,
        "mean run {mean} records: batches are not sticky"
    );
    verify_acknowledged(&agent.bootstrap, "keyless", &acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lz4_and_zstd_batches_are_accepted_and_read_back() {
    let agent = common::Agent::start(&["--default-partitions", "8"]);
    for (backend, c) in backends()
        .into_iter()
        .flat_map(|b| [(b, Compression::Lz4), (b, Compression::Zstd)])
    {
        let topic = &format!("{c:?}-{backend:?}");
        let p = KafkaProducer::new(settings(&agent).with_backend(backend).with_compression(c))
            .await
            .unwrap();
        let records: Vec<ProducerRecord> = (0..3000)
            .map(|i| {
                ProducerRecord::new(topic)
                    .with_key(format!("k{}", i % 50))
                    .with_value(format!("{c:?} record {i} {}", "x".repeat(i % 200)))
            })
            .collect();
        let acked = send_all(&p, records).await;
        let log = verify_acknowledged(&agent.bootstrap, topic, &acked).await;
        assert_eq!(log.values().map(Vec::len).sum::<usize>(), 3000);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_keep_each_partitions_order() {
    let agent = common::Agent::start(&["--default-partitions", "8"]);
    let p = KafkaProducer::new(
        settings(&agent)
            .with_max_in_flight_requests_per_connection(5)
            .with_batch_size_bytes(8 << 10)
            .with_linger(Duration::from_millis(1)),
    )
    .await
    .unwrap();
    let records: Vec<ProducerRecord> = (0..20_000)
        .map(|i| {
            ProducerRecord::new("pipelined")
                .with_key(format!("k{}", i % 64))
                .with_value(format!("{i:08}"))
        })
        .collect();
    let keys: Vec<Bytes> = records.iter().map(|r| r.key.clone().unwrap()).collect();
    let acked = send_all(&p, records).await;
    let mut last: HashMap<&Bytes, i64> = HashMap::new();
    for ((_, md), key) in acked.iter().zip(&keys) {
        if let Some(prev) = last.insert(key, md.offset) {
            assert!(md.offset > prev, "{key:?}: {} after {prev}", md.offset);
        }
    }
    let log = verify_acknowledged(&agent.bootstrap, "pipelined", &acked).await;
    assert_eq!(log.values().map(Vec::len).sum::<usize>(), 20_000);
}

/// The agent is SIGKILLed under load and restarted: requests in flight
/// fail, the producer retries them (at-least-once: duplicates allowed) and
/// every record it acknowledged is in the log at its offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_survive_an_agent_kill() {
    for backend in backends() {
        acknowledged_records_survive_an_agent_kill_with(backend).await;
    }
}

async fn acknowledged_records_survive_an_agent_kill_with(backend: KafkaProducerBackend) {
    let mut agent = common::Agent::start(&["--default-partitions", "8"]);
    let p = std::sync::Arc::new(
        KafkaProducer::new(
            settings(&agent)
                .with_backend(backend)
                .with_retries(1000)
                .with_retry_backoff(Duration::from_millis(200))
                .with_request_timeout(Duration::from_secs(10))
                .with_delivery_timeout(Duration::from_secs(90)),
        )
        .await
        .unwrap(),
    );
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sender = {
        let p = p.clone();
        let sent = sent.clone();
        tokio::spawn(async move {
            let mut pending = Vec::new();
            for i in 0..6000u32 {
                let v = Bytes::from(format!("survivor-{i}"));
                let r = ProducerRecord::new("killed")
                    .with_key(format!("k{}", i % 40))
                    .with_value(v.clone());
                pending.push((v, p.send(r).await.unwrap()));
                sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            let mut out = Vec::new();
            for (v, d) in pending {
                out.push((v, d.await));
            }
            out
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let at_kill = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        at_kill > 0 && at_kill < 6000,
        "killed mid-stream ({at_kill} sent)"
    );
    tokio::task::block_in_place(|| agent.kill_and_restart(Duration::from_millis(500)));
    let results = sender.await.unwrap();
    let failed: Vec<_> = results.iter().filter(|r| r.1.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first {:?}",
        failed.len(),
        failed[0].1
    );
    let acked: Vec<(Bytes, RecordMetadata)> =
        results.into_iter().map(|(v, r)| (v, r.unwrap())).collect();
    let log = verify_acknowledged(&agent.bootstrap, "killed", &acked).await;
    assert!(log.values().map(Vec::len).sum::<usize>() >= 6000);
}

#[tokio::test]
async fn native_producer_refuses_what_only_librdkafka_does() {
    for c in [Compression::Gzip, Compression::Snappy] {
        let err = KafkaProducer::new(
            KafkaProducerSettings::new("127.0.0.1:9")
                .with_backend(KafkaProducerBackend::Native)
                .with_compression(c),
        )
        .await
        .err()
        .expect("refused")
        .to_string();
        assert!(err.contains("KafkaProducerBackend::Rdkafka"), "{err}");
        assert!(err.contains(&format!("{c:?}")), "{err}");
    }
    let err = KafkaProducer::new(
        KafkaProducerSettings::new("127.0.0.1:9")
            .with_backend(KafkaProducerBackend::Native)
            .with_rdkafka_property("transactional.id", "t"),
    )
    .await
    .err()
    .expect("refused")
    .to_string();
    assert!(
        err.contains("transactional.id") && err.contains("Rdkafka"),
        "{err}"
    );
}
