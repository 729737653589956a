//! Test bodies shared by the rutomq and the Apache Kafka runs: each takes
//! a bootstrap address of a broker whose auto-created topics have
//! [`PARTITIONS`] partitions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use datum_mq::batch::{decode_batches, Record};
use datum_mq::native::conn::Connection;
use datum_mq::partitioner::partition_for_key;
use datum_mq::{
    connect, AutoOffsetReset, Compression, GroupProtocol, KafkaConsumerBackend,
    KafkaConsumerSettings, KafkaProducer, KafkaProducerBackend, KafkaProducerSettings, KafkaSource,
    ProducerRecord, RebalanceEvent, RecordMetadata, Security,
};
use datum_mq::{Ack, ConsumerRecord};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    FetchRequest, GroupId, ListGroupsRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

pub const PARTITIONS: i32 = 8;

/// A consumer backend and the group protocol it is asked for.
pub type ConsumerKind = (KafkaConsumerBackend, GroupProtocol);

/// The consumers this build has: native with the consumer protocol
/// (KIP-848; asked for explicitly, so a broker without it fails the test
/// rather than falling back) and with the classic one, and rdkafka
/// (classic).
pub fn consumer_kinds() -> Vec<ConsumerKind> {
    let mut b = vec![
        (KafkaConsumerBackend::Native, GroupProtocol::Consumer),
        (KafkaConsumerBackend::Native, GroupProtocol::Classic),
    ];
    if cfg!(feature = "rdkafka") {
        b.push((KafkaConsumerBackend::Rdkafka, GroupProtocol::Classic));
    }
    b
}

/// Source settings for `group` with the consumer kind's backend and group
/// protocol.
pub fn kind_settings(bootstrap: &str, group: &str, kind: ConsumerKind) -> KafkaConsumerSettings {
    source_settings(bootstrap, group)
        .with_backend(kind.0)
        .with_group_protocol(kind.1)
}

/// The source's next record; panics when none comes `within`, or on an
/// error.
pub async fn next_record(src: &mut KafkaSource, within: Duration) -> (ConsumerRecord, Ack) {
    tokio::time::timeout(within, src.next())
        .await
        .unwrap_or_else(|_| panic!("no record within {within:?}"))
        .expect("the source is open")
        .expect("no consumer error")
}

/// A PLAINTEXT connection for checks beside the client under test.
pub async fn admin(bootstrap: &str) -> Connection {
    connect(
        bootstrap,
        &Security::Plaintext,
        "test-admin",
        Duration::from_secs(30),
    )
    .await
    .unwrap()
}

/// A topic or group name per consumer kind (the consumer scenarios name
/// their topic and group with it).
pub fn kind_name(base: &str, kind: ConsumerKind) -> String {
    format!("{base}-{:?}-{:?}", kind.0, kind.1)
}

/// The producer backends this build has.
pub fn backends() -> Vec<KafkaProducerBackend> {
    let mut b = vec![KafkaProducerBackend::Native];
    if cfg!(feature = "rdkafka") {
        b.push(KafkaProducerBackend::Rdkafka);
    }
    b
}

pub fn producer_settings(bootstrap: &str, backend: KafkaProducerBackend) -> KafkaProducerSettings {
    KafkaProducerSettings::new(bootstrap).with_backend(backend)
}

/// Every record of `topic`-`partition` from offset 0.
pub async fn read_partition(bootstrap: &str, topic: &str, partition: i32) -> Vec<Record> {
    let conn = admin(bootstrap).await;
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
pub async fn verify_acknowledged(
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

pub async fn send_all(
    p: &KafkaProducer,
    records: Vec<ProducerRecord>,
) -> Vec<(Bytes, RecordMetadata)> {
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

/// Keyed records land on `to_positive(murmur2(key)) % partitions`, keep
/// their order per key, and read back with their headers.
pub async fn keyed_placement(bootstrap: &str, backend: KafkaProducerBackend, topic: &str) {
    let p = KafkaProducer::new(producer_settings(bootstrap, backend))
        .await
        .unwrap();
    assert_eq!(p.backend(), backend);
    let records: Vec<ProducerRecord> = (0..5000)
        .map(|i| {
            ProducerRecord::new(topic)
                .with_key(format!("key-{}", i % 700))
                .with_value(format!("value-{i}"))
                .with_header("n", Some(Bytes::from(i.to_string())))
        })
        .collect();
    let keys: Vec<Bytes> = records.iter().map(|r| r.key.clone().unwrap()).collect();
    let acked = send_all(&p, records).await;
    let mut last: HashMap<&Bytes, i64> = HashMap::new();
    for ((_, md), key) in acked.iter().zip(&keys) {
        assert_eq!(md.partition, partition_for_key(key, PARTITIONS), "{key:?}");
        if let Some(prev) = last.insert(key, md.offset) {
            assert!(md.offset > prev, "{key:?}");
        }
    }
    let log = verify_acknowledged(bootstrap, topic, &acked).await;
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

/// LZ4 and Zstd batches are accepted and read back.
pub async fn compressed(
    bootstrap: &str,
    backend: KafkaProducerBackend,
    c: Compression,
    topic: &str,
) {
    // The serial path, one request in flight (the default pipelines 5).
    let p = KafkaProducer::new(
        producer_settings(bootstrap, backend)
            .with_compression(c)
            .with_max_in_flight_requests_per_connection(1),
    )
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
    let log = verify_acknowledged(bootstrap, topic, &acked).await;
    assert_eq!(log.values().map(Vec::len).sum::<usize>(), 3000);
}

/// Native keyless records fill sticky batches that move round-robin.
pub async fn keyless_sticky(bootstrap: &str, topic: &str) {
    let p = KafkaProducer::new(
        producer_settings(bootstrap, KafkaProducerBackend::Native)
            .with_batch_size_bytes(16 << 10)
            .with_linger(Duration::from_millis(50))
            // The serial path (the default pipelines 5).
            .with_max_in_flight_requests_per_connection(1),
    )
    .await
    .unwrap();
    let records: Vec<ProducerRecord> = (0..4000)
        .map(|i| ProducerRecord::new(topic).with_value(vec![(i % 251) as u8; 1000]))
        .collect();
    let acked = send_all(&p, records).await;
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
    let used: BTreeSet<i32> = acked.iter().map(|a| a.1.partition).collect();
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
    verify_acknowledged(bootstrap, topic, &acked).await;
}

/// Pipelined requests (5 in flight) keep each partition's order.
pub async fn pipelined(bootstrap: &str, backend: KafkaProducerBackend, topic: &str) {
    let p = KafkaProducer::new(
        producer_settings(bootstrap, backend)
            .with_max_in_flight_requests_per_connection(5)
            .with_batch_size_bytes(8 << 10)
            .with_linger(Duration::from_millis(1)),
    )
    .await
    .unwrap();
    let records: Vec<ProducerRecord> = (0..20_000)
        .map(|i| {
            ProducerRecord::new(topic)
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
    let log = verify_acknowledged(bootstrap, topic, &acked).await;
    assert_eq!(log.values().map(Vec::len).sum::<usize>(), 20_000);
}

/// The offset after the last record, per partition of `topic`.
pub async fn partition_ends(bootstrap: &str, topic: &str) -> BTreeMap<i32, i64> {
    let mut ends = BTreeMap::new();
    for p in 0..PARTITIONS {
        let end = read_partition(bootstrap, topic, p)
            .await
            .last()
            .map_or(0, |r| r.offset + 1);
        ends.insert(p, end);
    }
    ends
}

pub async fn produce(bootstrap: &str, topic: &str, n: usize) {
    let p = KafkaProducer::new(producer_settings(bootstrap, KafkaProducerBackend::Native))
        .await
        .unwrap();
    let records = (0..n)
        .map(|i| {
            ProducerRecord::new(topic)
                .with_key(format!("k{}", i % 97))
                .with_value(format!("v{i}"))
        })
        .collect();
    send_all(&p, records).await;
}

pub fn source_settings(bootstrap: &str, group: &str) -> KafkaConsumerSettings {
    KafkaConsumerSettings::new(bootstrap, group)
        .with_auto_offset_reset(AutoOffsetReset::Earliest)
        .with_session_timeout(Duration::from_secs(6))
        .with_heartbeat_interval(Duration::from_millis(500))
        .with_auto_commit_interval(Duration::from_millis(300))
        .with_fetch_max_wait(Duration::from_millis(100))
}

/// (partition -> committed offset) of `group` for `topic`.
pub async fn committed(bootstrap: &str, group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let conn = admin(bootstrap).await;
    // The group's coordinator answers; on a one-broker cluster that is it.
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_indexes((0..PARTITIONS).collect())]));
    let resp = conn.call(&req, (1, 7)).await.unwrap();
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect()
}

/// The type ("classic" or "consumer") the broker lists `group` with
/// (ListGroups v5).
pub async fn group_type(bootstrap: &str, group: &str) -> String {
    let conn = admin(bootstrap).await;
    let resp = conn
        .call(&ListGroupsRequest::default(), (5, 5))
        .await
        .unwrap();
    assert_eq!(resp.error_code, 0);
    resp.groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .unwrap_or_else(|| panic!("group {group} listed"))
        .group_type
        .to_string()
}

/// A group consumes everything; after close every partition is
/// committed at its end.
pub async fn group_consumes_everything(bootstrap: &str, kind: ConsumerKind, name: &str) {
    let topic = &kind_name(name, kind);
    let group = &format!("{topic}-group");
    let settings = || kind_settings(bootstrap, group, kind);
    produce(bootstrap, topic, 3000).await;
    let mut src = KafkaSource::new(settings(), &[topic]).await.unwrap();
    let mut seen = BTreeSet::new();
    while seen.len() < 3000 {
        let (rec, ack) = next_record(&mut src, Duration::from_secs(30)).await;
        assert!(
            seen.insert((rec.partition, rec.offset)),
            "delivered twice: {rec:?}"
        );
        ack.ack();
    }
    assert_eq!(src.assignment().len(), PARTITIONS as usize);
    // The broker lists the group under the protocol asked for.
    let want = match kind.1 {
        GroupProtocol::Consumer => "consumer",
        _ => "classic",
    };
    assert_eq!(group_type(bootstrap, group).await, want, "{kind:?}");
    src.close().await.unwrap();
    let c = committed(bootstrap, group, topic).await;
    let ends: BTreeMap<i32, i64> = seen.iter().fold(BTreeMap::new(), |mut m, (p, o)| {
        let e = m.entry(*p).or_insert(0);
        *e = (*e).max(o + 1);
        m
    });
    for p in 0..PARTITIONS {
        assert_eq!(
            c[&p],
            *ends.get(&p).unwrap_or(&-1),
            "partition {p} committed at its end"
        );
    }
}

/// Commits stay below the first unacknowledged record; a member that is
/// dropped with work unacknowledged is replaced by one that replays it.
pub async fn commits_behind_acks_and_replay(bootstrap: &str, kind: ConsumerKind, name: &str) {
    let topic = &kind_name(name, kind);
    let group = &format!("{topic}-group");
    let settings = || kind_settings(bootstrap, group, kind);
    produce(bootstrap, topic, 2000).await;
    let mut first = KafkaSource::new(settings(), &[topic]).await.unwrap();
    let mut per_partition: BTreeMap<i32, usize> = BTreeMap::new();
    let mut held = BTreeMap::new();
    let mut acked = BTreeSet::new();
    for _ in 0..2000 {
        let (rec, ack) = next_record(&mut first, Duration::from_secs(30)).await;
        let n = per_partition.entry(rec.partition).or_default();
        *n += 1;
        if *n == 10 {
            held.insert(rec.partition, (rec.offset, ack));
        } else {
            acked.insert((rec.partition, rec.offset));
            ack.ack();
        }
    }
    first.commit().await.unwrap();
    let c = committed(bootstrap, group, topic).await;
    for (p, (offset, _)) in &held {
        assert_eq!(
            c[p], *offset,
            "partition {p}: committed exactly up to the unacknowledged record"
        );
    }
    drop(held);
    drop(first);
    let mut second = KafkaSource::new(settings(), &[topic]).await.unwrap();
    let expected_replay: usize = c
        .iter()
        .filter(|(p, _)| per_partition.contains_key(p))
        .map(|(p, o)| per_partition[p] as i64 - o)
        .sum::<i64>() as usize;
    let mut replayed = BTreeSet::new();
    while replayed.len() < expected_replay {
        let (rec, ack) = next_record(&mut second, Duration::from_secs(60)).await;
        assert!(
            rec.offset >= c[&rec.partition],
            "nothing below the commit comes again"
        );
        replayed.insert((rec.partition, rec.offset));
        ack.ack();
    }
    let all: BTreeSet<_> = acked.union(&replayed).cloned().collect();
    assert_eq!(all.len(), 2000, "every record was processed");
    second.close().await.unwrap();
}

/// Two members split the partitions 4 and 4 and consume everything. The
/// first holds all 8 before the second joins, so it must give some up; each
/// member's rebalance listener, replayed, ends at its assignment.
pub async fn two_members_split(bootstrap: &str, kind: ConsumerKind, name: &str) {
    let topic = &kind_name(name, kind);
    let group = &format!("{topic}-group");
    type Events = Arc<Mutex<Vec<RebalanceEvent>>>;
    let listening = |events: &Events| {
        let events = events.clone();
        kind_settings(bootstrap, group, kind)
            .with_rebalance_listener(move |e| events.lock().unwrap().push(e.clone()))
    };
    let replay = |events: &Events| {
        let mut held = BTreeSet::new();
        for e in events.lock().unwrap().iter() {
            match e {
                RebalanceEvent::Assigned(ps) => held.extend(ps.iter().cloned()),
                RebalanceEvent::Revoked(ps) | RebalanceEvent::Lost(ps) => ps.iter().for_each(|p| {
                    held.remove(p);
                }),
            }
        }
        held
    };
    produce(bootstrap, topic, 800).await;
    let (ea, eb): (Events, Events) = Default::default();
    let mut a = KafkaSource::new(listening(&ea), &[topic]).await.unwrap();
    let mut seen = BTreeSet::new();
    while a.assignment().len() < PARTITIONS as usize {
        let (r, ack) = next_record(&mut a, Duration::from_secs(30)).await;
        seen.insert((r.partition, r.offset));
        ack.ack();
    }
    let mut b = KafkaSource::new(listening(&eb), &[topic]).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while (a.assignment().len() + b.assignment().len() != PARTITIONS as usize
        || a.assignment().is_empty()
        || b.assignment().is_empty()
        || seen.len() < 800)
        && tokio::time::Instant::now() < deadline
    {
        tokio::select! {
            Some(Ok((r, ack))) = a.next() => { seen.insert((r.partition, r.offset)); ack.ack(); }
            Some(Ok((r, ack))) = b.next() => { seen.insert((r.partition, r.offset)); ack.ack(); }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    let (pa, pb) = (a.assignment(), b.assignment());
    assert_eq!(pa.len() + pb.len(), PARTITIONS as usize, "{pa:?} {pb:?}");
    assert_eq!(pa.len(), 4, "8 partitions split 4 and 4: {pa:?}");
    assert!(pa.iter().all(|p| !pb.contains(p)), "no partition twice");
    assert_eq!(seen.len(), 800);
    assert!(
        ea.lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, RebalanceEvent::Revoked(_))),
        "the first member was told it gave partitions up: {:?}",
        ea.lock().unwrap()
    );
    assert_eq!(
        replay(&ea),
        pa.into_iter().collect(),
        "{:?}",
        ea.lock().unwrap()
    );
    assert_eq!(
        replay(&eb),
        pb.into_iter().collect(),
        "{:?}",
        eb.lock().unwrap()
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// Seek back replays a partition from the given offset; a paused
/// partition gets no records until it is resumed, while others go on.
pub async fn seek_and_pause(bootstrap: &str, kind: ConsumerKind, name: &str) {
    let topic = &kind_name(name, kind);
    let group = &format!("{topic}-group");
    let settings = || kind_settings(bootstrap, group, kind);
    use datum_mq::partitioner::partition_for_key;
    let keys = |range: std::ops::Range<usize>| -> Vec<(String, i32)> {
        range
            .map(|i| {
                let k = format!("k{}", i % 97);
                let p = partition_for_key(k.as_bytes(), PARTITIONS);
                (k, p)
            })
            .collect()
    };
    produce(bootstrap, topic, 800).await;
    let mut src = KafkaSource::new(settings(), &[topic]).await.unwrap();
    let mut in_p0 = 0usize;
    for _ in 0..800 {
        let (rec, ack) = next_record(&mut src, Duration::from_secs(30)).await;
        in_p0 += usize::from(rec.partition == 0);
        ack.ack();
    }
    assert!(in_p0 > 0);
    src.seek(topic, 0, 0).await.unwrap();
    for want in 0..in_p0 as i64 {
        let (rec, ack) = next_record(&mut src, Duration::from_secs(30)).await;
        assert_eq!(
            (rec.partition, rec.offset),
            (0, want),
            "replayed in order from 0"
        );
        ack.ack();
    }
    src.pause(&[(topic, 0)]).await.unwrap();
    // 800 more records with the same keys: partition 0 gets `in_p0` more.
    produce(bootstrap, topic, 800).await;
    let others = keys(0..800).iter().filter(|k| k.1 != 0).count();
    for _ in 0..others {
        let (rec, ack) = next_record(&mut src, Duration::from_secs(30)).await;
        assert_ne!(rec.partition, 0, "paused");
        ack.ack();
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(1), src.next())
            .await
            .is_err(),
        "nothing while partition 0 is paused"
    );
    src.resume(&[(topic, 0)]).await.unwrap();
    for _ in 0..in_p0 {
        let (rec, ack) = next_record(&mut src, Duration::from_secs(30)).await;
        assert_eq!(rec.partition, 0, "resumed");
        assert!(rec.offset >= in_p0 as i64);
        ack.ack();
    }
    src.close().await.unwrap();
}

/// Apache Kafka's Java producer (kafka-clients from the jars that
/// `benches/kafka/start-kafka.sh` fetched) sends keyed records to
/// `topic`; each datum-mq backend then sends the same keys to
/// `topic`-`backend` and must pick the same partition for every key.
pub async fn java_placement(bootstrap: &str, topic: &str) {
    const N: usize = 2000;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // The jar folder of the Kafka the test started: start-kafka.sh --fetch
    // names it (and its default version) without fetching again.
    let libs = std::env::var("KAFKA_LIBS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            let out = std::process::Command::new(root.join("benches/kafka/start-kafka.sh"))
                .arg("--fetch")
                .output()
                .expect("start-kafka.sh --fetch runs");
            let said = String::from_utf8_lossy(&out.stdout);
            let folder = said
                .lines()
                .find_map(|l| l.strip_prefix("FETCHED "))
                .and_then(|rest| rest.split_whitespace().nth(1))
                .unwrap_or_else(|| panic!("start-kafka.sh --fetch said {said:?}"));
            std::path::PathBuf::from(folder)
        });
    let classes = std::env::temp_dir().join(format!("datum-mq-java-{}", std::process::id()));
    std::fs::create_dir_all(&classes).unwrap();
    let cp = format!("{}/*", libs.display());
    let run = |cmd: &mut std::process::Command| {
        let out = cmd.output().expect("java tools run");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let (bootstrap_owned, topic_owned) = (bootstrap.to_owned(), topic.to_owned());
    let java_out = tokio::task::spawn_blocking(move || {
        run(std::process::Command::new("javac")
            .args(["-cp", &cp, "-d"])
            .arg(&classes)
            .arg(root.join("client/tests/java/KeyedPlacement.java")));
        let out = run(std::process::Command::new("java")
            .arg("-cp")
            .arg(format!("{cp}:{}", classes.display()))
            .args([
                "KeyedPlacement",
                &bootstrap_owned,
                &topic_owned,
                &N.to_string(),
            ]));
        let _ = std::fs::remove_dir_all(&classes);
        out
    })
    .await
    .unwrap();
    let java: Vec<(String, i32)> = java_out
        .lines()
        .map(|l| {
            let (k, p) = l.split_once('\t').expect("key<TAB>partition");
            (k.to_owned(), p.parse().unwrap())
        })
        .collect();
    assert_eq!(java.len(), N);
    assert!(
        java.iter().map(|(_, p)| p).collect::<BTreeSet<_>>().len() == PARTITIONS as usize,
        "the Java producer used every partition"
    );
    for backend in backends() {
        let p = KafkaProducer::new(producer_settings(bootstrap, backend))
            .await
            .unwrap();
        let records = java
            .iter()
            .enumerate()
            .map(|(i, (k, _))| {
                assert_eq!(*k, format!("k{}{i}", "x".repeat(i % 13)));
                ProducerRecord::new(format!("{topic}-{backend:?}"))
                    .with_key(k.clone())
                    .with_value(format!("rust-{i}"))
            })
            .collect();
        let acked = send_all(&p, records).await;
        for ((k, java_partition), (_, md)) in java.iter().zip(&acked) {
            assert_eq!(md.partition, *java_partition, "{backend:?}: key {k:?}");
        }
    }
}
