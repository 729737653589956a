//! The same scenarios as against rutomq, against a real Apache Kafka 4.1
//! broker (one KRaft node from the Maven Central jars, started by
//! `benches/kafka/start-kafka.sh`; needs Java 17+ and Maven): both producer
//! backends' keyed placement, LZ4/Zstd and pipelining, native keyless
//! stickiness, and the KafkaSource group scenarios. One broker for the whole
//! file (it takes seconds to start), one topic and group per scenario.

mod common;

use common::scenarios::{self, backends};
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
    scenarios::keyless_sticky(&b, "keyless").await;
    scenarios::group_consumes_everything(&b, "src", "g1").await;
    scenarios::commits_behind_acks_and_replay(&b, "work", "g2").await;
    scenarios::two_members_split(&b, "split", "g3").await;
    scenarios::seek_and_pause(&b, "seek", "g4").await;
    tokio::task::spawn_blocking(move || drop(kafka))
        .await
        .unwrap();
}
