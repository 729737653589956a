//! The producer backends (native, and rdkafka when built with it) against a
//! real rutomq agent (with its own PostgreSQL) over TCP: keyed records land
//! on the partition Kafka's Java partitioner picks, keyless ones (native) go in
//! sticky batches that move across partitions, LZ4 and Zstd batches are
//! accepted and read back, pipelined requests keep each partition's order, and a SIGKILLed agent costs no
//! acknowledged record. Every check reads the partitions back with raw
//! Fetch requests and compares each acknowledged record at its offset.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::scenarios::{self, backends, producer_settings, verify_acknowledged};
use datum_mq::{
    Compression, KafkaProducer, KafkaProducerBackend, KafkaProducerSettings, ProducerRecord,
    RecordMetadata,
};

fn start() -> common::Agent {
    common::Agent::start(&["--default-partitions", "8"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_land_on_kafkas_partitions_and_read_back() {
    let agent = start();
    for backend in backends() {
        scenarios::keyed_placement(&agent.bootstrap, backend, &format!("keyed-{backend:?}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_go_in_sticky_batches_across_partitions() {
    let agent = start();
    scenarios::keyless_sticky(&agent.bootstrap, "keyless").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lz4_and_zstd_batches_are_accepted_and_read_back() {
    let agent = start();
    for backend in backends() {
        for c in [Compression::Lz4, Compression::Zstd] {
            scenarios::compressed(&agent.bootstrap, backend, c, &format!("{c:?}-{backend:?}"))
                .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_keep_each_partitions_order() {
    let agent = start();
    for backend in backends() {
        scenarios::pipelined(&agent.bootstrap, backend, &format!("pipelined-{backend:?}")).await;
    }
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
            producer_settings(&agent.bootstrap, backend)
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

/// `flush` waits for the records sent before it, not for the producer to
/// go idle: it returns while another task keeps sending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_returns_while_others_keep_sending() {
    let agent = start();
    for backend in backends() {
        let p = std::sync::Arc::new(
            KafkaProducer::new(producer_settings(&agent.bootstrap, backend))
                .await
                .unwrap(),
        );
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = {
            let (p, stop) = (p.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                let started = std::time::Instant::now();
                // Bounded, so a failing test ends.
                while !stop.load(std::sync::atomic::Ordering::Relaxed)
                    && started.elapsed() < Duration::from_secs(30)
                {
                    let r = ProducerRecord::new("flush-busy").with_value(format!("{i}"));
                    drop(p.send(r).await.unwrap());
                    i += 1;
                    if i % 50 == 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            })
        };
        let mut before = Vec::new();
        for i in 0..100 {
            let d = p
                .send(ProducerRecord::new("flush-mine").with_value(format!("{i}")))
                .await
                .unwrap();
            before.push(d);
        }
        tokio::time::timeout(Duration::from_secs(10), p.flush())
            .await
            .unwrap_or_else(|_| {
                panic!("{backend:?}: flush did not return while another task kept sending")
            })
            .unwrap();
        for d in before {
            // Already delivered: completes at once.
            tokio::time::timeout(Duration::from_millis(100), d)
                .await
                .expect("delivered by the time flush returned")
                .unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.await.unwrap();
    }
}
