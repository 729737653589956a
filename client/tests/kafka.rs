//! The same scenarios as against rutomq, against a real Apache Kafka 4.1
//! broker (one KRaft node from the Maven Central jars, started by
//! `benches/kafka/start-kafka.sh`; needs Java 17+ and Maven): both producer
//! backends' keyed placement, LZ4/Zstd and pipelining, native keyless
//! stickiness, the KafkaSource group scenarios (native with the consumer protocol, KIP-848, and the classic one; rdkafka), and keyed placement
//! compared with Kafka's own Java producer for the same keys. One broker for the whole
//! file (it takes seconds to start), one topic and group per scenario.

mod common;

use common::scenarios::{self, backends, consumer_kinds};
use datum_mq::Compression;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_against_apache_kafka() {
    let kafka = tokio::task::spawn_blocking(common::Kafka::start)
        .await
        .unwrap();
    let b = kafka.bootstrap.clone();
    for backend in backends() {
        scenarios::keyed_placement(&b, backend, &format!("keyed-{backend:?}")).await;
        for c in [Compression::Lz4, Compression::Zstd] {
            scenarios::compressed(&b, backend, c, &format!("{c:?}-{backend:?}")).await;
        }
        scenarios::pipelined(&b, backend, &format!("pipelined-{backend:?}")).await;
    }
    scenarios::java_placement(&b, "java-keys").await;
    scenarios::keyless_sticky(&b, "keyless").await;
    for c in consumer_kinds() {
        scenarios::group_consumes_everything(&b, c, "src").await;
        scenarios::commits_behind_acks_and_replay(&b, c, "work").await;
        scenarios::two_members_split(&b, c, "split").await;
        scenarios::seek_and_pause(&b, c, "seek").await;
    }
    tokio::task::spawn_blocking(move || drop(kafka))
        .await
        .unwrap();
}
