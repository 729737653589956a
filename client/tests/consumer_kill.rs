//! A KafkaSource in a separate process is SIGKILLed mid-stream, for each
//! consumer kind (native over the consumer protocol, native classic,
//! rdkafka), against a real rutomq agent and against Apache Kafka 4.1.1.
//! The killed process acknowledged most records and held back a few; after
//! the kill:
//! - every committed offset has only acknowledged records below it (no
//!   commit ran ahead of the work), and commits did happen;
//! - a successor in the same group, once the dead member's session ran out,
//!   delivers every record the dead one had not acknowledged: nothing lost.
//!
//! The child process is this test binary run again on the ignored test
//! `child_consumer`, which reads its orders from the environment.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::scenarios::{
    committed, consumer_kinds, kind_name, kind_settings, next_record, produce,
};
use datum_mq::{GroupProtocol, KafkaConsumerBackend, KafkaSource};

const RECORDS: usize = 3000;
/// The child never acknowledges the record at this offset of each
/// partition (and so, per partition, nothing from there may be committed).
const HELD_OFFSET: i64 = 150;

/// The killed member: consumes, acknowledges every record but the held
/// ones, and prints "A partition offset" per acknowledged record. Runs
/// until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by consumer_killed_mid_stream as its child process"]
async fn child_consumer() {
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is set"));
    let backend = match env("CHILD_BACKEND").as_str() {
        "Native" => KafkaConsumerBackend::Native,
        _ => KafkaConsumerBackend::Rdkafka,
    };
    let protocol = match env("CHILD_PROTOCOL").as_str() {
        "Consumer" => GroupProtocol::Consumer,
        _ => GroupProtocol::Classic,
    };
    let settings = kind_settings(
        &env("CHILD_BOOTSTRAP"),
        &env("CHILD_GROUP"),
        (backend, protocol),
    );
    let mut src = KafkaSource::new(settings, &[&env("CHILD_TOPIC")])
        .await
        .unwrap();
    let mut held = Vec::new();
    loop {
        let (r, ack) = src.next().await.unwrap().unwrap();
        if r.offset == HELD_OFFSET {
            held.push(ack);
        } else {
            ack.ack();
            println!("A {} {}", r.partition, r.offset);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_killed_mid_stream_loses_nothing_and_never_commits_ahead() {
    let agent = common::Agent::start(&[
        "--default-partitions",
        "8",
        "--group-initial-rebalance-delay-ms",
        "200",
        "--group-consumer-session-timeout-ms",
        "6000",
    ]);
    killed_mid_stream(&agent.bootstrap).await;
}

/// The same against Apache Kafka 4.1.1, with the consumer protocol's
/// session timeout lowered to 6 s (its minimum too) so the successor does
/// not wait 45 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_killed_mid_stream_against_apache_kafka() {
    let kafka = tokio::task::spawn_blocking(|| {
        common::Kafka::start_with(|_, _| {
            "group.consumer.min.session.timeout.ms=6000
             group.consumer.session.timeout.ms=6000
             group.consumer.min.heartbeat.interval.ms=500
             group.consumer.heartbeat.interval.ms=1000
"
            .to_string()
        })
    })
    .await
    .unwrap();
    killed_mid_stream(&kafka.bootstrap).await;
    tokio::task::spawn_blocking(move || drop(kafka))
        .await
        .unwrap();
}

async fn killed_mid_stream(bootstrap: &str) {
    for kind in consumer_kinds() {
        let topic = kind_name("killed", kind);
        let group = kind_name("killed-group", kind);
        produce(bootstrap, &topic, RECORDS).await;

        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "child_consumer", "--nocapture"])
            .env("CHILD_BOOTSTRAP", bootstrap)
            .env("CHILD_TOPIC", &topic)
            .env("CHILD_GROUP", &group)
            .env("CHILD_BACKEND", format!("{:?}", kind.0))
            .env("CHILD_PROTOCOL", format!("{:?}", kind.1))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut w = line.split(' ');
                if let (Some("A"), Some(p), Some(o)) = (w.next(), w.next(), w.next()) {
                    let _ = tx.send((p.parse::<i32>().unwrap(), o.parse::<i64>().unwrap()));
                }
            }
        });
        // (partition -> offsets) the child acknowledged.
        let mut acked: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
        // Most of the topic, then a few commit intervals (300 ms) so
        // periodic commits ran, then the kill.
        for _ in 0..RECORDS * 2 / 3 {
            let (p, o) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: the child consumes"))
                .expect("the child runs");
            acked.entry(p).or_default().insert(o);
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        child.kill().unwrap();
        child.wait().unwrap();
        // What it printed before it died.
        while let Some((p, o)) = rx.recv().await {
            acked.entry(p).or_default().insert(o);
        }

        // Commits: only acknowledged records below each, and some made.
        let c = committed(bootstrap, &group, &topic).await;
        assert!(
            c.values().any(|&o| o > 0),
            "{kind:?}: the child committed something: {c:?}"
        );
        for (p, &o) in &c {
            let a = acked.get(p).cloned().unwrap_or_default();
            if let Some(missing) = (0..o).find(|x| !a.contains(x)) {
                panic!("{kind:?}: partition {p} committed at {o} though {missing} was never acknowledged");
            }
        }

        // The successor delivers everything the child did not acknowledge.
        let mut rest: BTreeSet<(i32, i64)> = BTreeSet::new();
        let per_partition = common::scenarios::partition_ends(bootstrap, &topic).await;
        for (p, end) in &per_partition {
            for o in 0..*end {
                if !acked.get(p).is_some_and(|a| a.contains(&o)) {
                    rest.insert((*p, o));
                }
            }
        }
        assert!(!rest.is_empty());
        let mut next = KafkaSource::new(kind_settings(bootstrap, &group, kind), &[&topic])
            .await
            .unwrap();
        while !rest.is_empty() {
            let (r, ack) = next_record(&mut next, Duration::from_secs(60)).await;
            assert!(
                r.offset >= c.get(&r.partition).copied().unwrap_or(0),
                "{kind:?}: nothing below the commit is delivered again"
            );
            rest.remove(&(r.partition, r.offset));
            ack.ack();
        }
        next.close().await.unwrap();
    }
}
