//! KafkaSource (native consumer) against a real rutomq agent over TCP:
//! a group consumes everything produced; two members split the partitions;
//! a member that dies mid-stream leaves commits only below its first
//! unacknowledged record (checked with a raw OffsetFetch), and its
//! successor replays from there, so no record is lost.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use datum_mq::{
    AutoOffsetReset, KafkaConsumerSettings, KafkaProducer, KafkaProducerBackend,
    KafkaProducerSettings, KafkaSource, ProducerRecord, Security,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const PARTITIONS: i32 = 8;

async fn produce(bootstrap: &str, topic: &str, n: usize) {
    let p = KafkaProducer::new(
        KafkaProducerSettings::new(bootstrap).with_backend(KafkaProducerBackend::Native),
    )
    .await
    .unwrap();
    let mut ds = Vec::new();
    for i in 0..n {
        let r = ProducerRecord::new(topic)
            .with_key(format!("k{}", i % 97))
            .with_value(format!("v{i}"));
        ds.push(p.send(r).await.unwrap());
    }
    for d in ds {
        d.await.unwrap();
    }
}

fn settings(bootstrap: &str, group: &str) -> KafkaConsumerSettings {
    KafkaConsumerSettings::new(bootstrap, group)
        .with_auto_offset_reset(AutoOffsetReset::Earliest)
        .with_session_timeout(Duration::from_secs(6))
        .with_heartbeat_interval(Duration::from_millis(500))
        .with_auto_commit_interval(Duration::from_millis(300))
        .with_fetch_max_wait(Duration::from_millis(100))
}

/// (partition -> committed offset) of `group` for `topic`.
async fn committed(bootstrap: &str, group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let conn = datum_mq::connect(
        bootstrap,
        &Security::Plaintext,
        "check",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumes_everything_and_commits_behind_acks() {
    let agent = common::Agent::start(&[
        "--default-partitions",
        "8",
        "--group-initial-rebalance-delay-ms",
        "200",
    ]);
    produce(&agent.bootstrap, "src", 3000).await;
    let mut src = KafkaSource::new(settings(&agent.bootstrap, "g1"), &["src"])
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
    while seen.len() < 3000 {
        let (rec, ack) = tokio::time::timeout(Duration::from_secs(30), src.next())
            .await
            .expect("records keep coming")
            .unwrap()
            .unwrap();
        assert!(
            seen.insert((rec.partition, rec.offset)),
            "delivered twice: {rec:?}"
        );
        ack.ack();
    }
    assert_eq!(src.assignment().len(), PARTITIONS as usize);
    src.close().await.unwrap();
    let c = committed(&agent.bootstrap, "g1", "src").await;
    let ends: BTreeMap<i32, i64> = seen.iter().fold(BTreeMap::new(), |mut m, (p, o)| {
        let e = m.entry(*p).or_insert(0);
        *e = (*e).max(o + 1);
        m
    });
    for p in 0..PARTITIONS {
        assert_eq!(
            c[&p],
            *ends.get(&p).unwrap_or(&0),
            "partition {p} committed at its end"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_stay_below_unacked_work_and_a_successor_replays_it() {
    let agent = common::Agent::start(&[
        "--default-partitions",
        "8",
        "--group-initial-rebalance-delay-ms",
        "200",
    ]);
    produce(&agent.bootstrap, "work", 2000).await;
    let mut first = KafkaSource::new(settings(&agent.bootstrap, "g2"), &["work"])
        .await
        .unwrap();
    // Acknowledge everything but the 10th record of each partition.
    let mut per_partition: BTreeMap<i32, usize> = BTreeMap::new();
    let mut held = BTreeMap::new();
    let mut acked = BTreeSet::new();
    let mut taken = 0;
    while taken < 2000 {
        let (rec, ack) = tokio::time::timeout(Duration::from_secs(30), first.next())
            .await
            .expect("records keep coming")
            .unwrap()
            .unwrap();
        taken += 1;
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
    let c = committed(&agent.bootstrap, "g2", "work").await;
    for (p, (offset, _)) in &held {
        assert_eq!(
            c[p], *offset,
            "partition {p}: committed exactly up to the unacknowledged record"
        );
    }
    // The member dies with work unacknowledged (dropped, no close).
    drop(held);
    drop(first);
    let mut second = KafkaSource::new(settings(&agent.bootstrap, "g2"), &["work"])
        .await
        .unwrap();
    let mut replayed = BTreeSet::new();
    let expected_replay: usize = c
        .iter()
        .map(|(p, o)| per_partition[p] as i64 - o)
        .sum::<i64>() as usize;
    while replayed.len() < expected_replay {
        let (rec, ack) = tokio::time::timeout(Duration::from_secs(60), second.next())
            .await
            .expect("the successor replays")
            .unwrap()
            .unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_partitions() {
    let agent = common::Agent::start(&[
        "--default-partitions",
        "8",
        "--group-initial-rebalance-delay-ms",
        "200",
    ]);
    produce(&agent.bootstrap, "split", 800).await;
    let mut a = KafkaSource::new(settings(&agent.bootstrap, "g3"), &["split"])
        .await
        .unwrap();
    let mut b = KafkaSource::new(settings(&agent.bootstrap, "g3"), &["split"])
        .await
        .unwrap();
    let mut seen = BTreeSet::new();
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
    assert_eq!(pa.len(), 4, "range splits 8 partitions 4 and 4: {pa:?}");
    assert!(pa.iter().all(|p| !pb.contains(p)), "no partition twice");
    assert_eq!(seen.len(), 800);
    a.close().await.unwrap();
    b.close().await.unwrap();
}
