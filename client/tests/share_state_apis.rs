//! The share-state APIs (KIP-932's persister RPCs, keys 83–87) and the
//! share-group offset APIs (90–92) on one agent, as a broker or a tool
//! would call them: a share group made by AlterShareGroupOffsets; its
//! state written in Kafka's persisted form and read back (the leading
//! acknowledged records done with: the start moves past them), its summary,
//! an older state epoch fenced, a reinitialised start, the state deleted;
//! the share coordinator found with FindCoordinator key type 2. Apache
//! Kafka answers these only between its own brokers (and only with its
//! share feature on), so rutomq is checked on its own here.

mod common;

use common::s;
use common::scenarios::admin;
use datum_mq::native::conn::Connection;
use kafka_protocol::messages::*;
use uuid::Uuid;

async fn read_state(c: &Connection, g: &str, topic: Uuid, p: i32) -> String {
    let r = c
        .call_version(
            &ReadShareGroupStateRequest::default()
                .with_group_id(s(g))
                .with_topics(vec![
                    read_share_group_state_request::ReadStateData::default()
                        .with_topic_id(topic)
                        .with_partitions(vec![
                            read_share_group_state_request::PartitionData::default()
                                .with_partition(p),
                        ]),
                ]),
            0,
        )
        .await
        .unwrap();
    let p = &r.results[0].partitions[0];
    let batches: Vec<String> = p
        .state_batches
        .iter()
        .map(|b| {
            format!(
                "{}-{}:{}x{}",
                b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
            )
        })
        .collect();
    format!(
        "code {} epoch {} start {} [{}]",
        p.error_code,
        p.state_epoch,
        p.start_offset,
        batches.join(" ")
    )
}

async fn write_state(
    c: &Connection,
    g: &str,
    topic: Uuid,
    epoch: i32,
    start: i64,
    batches: &[(i64, i64, i8, i16)],
) -> i16 {
    let r = c
        .call_version(
            &WriteShareGroupStateRequest::default()
                .with_group_id(s(g))
                .with_topics(vec![
                    write_share_group_state_request::WriteStateData::default()
                        .with_topic_id(topic)
                        .with_partitions(vec![
                            write_share_group_state_request::PartitionData::default()
                                .with_partition(0)
                                .with_state_epoch(epoch)
                                .with_leader_epoch(0)
                                .with_start_offset(start)
                                .with_state_batches(
                                    batches
                                        .iter()
                                        .map(|&(f, l, st, n)| {
                                            write_share_group_state_request::StateBatch::default()
                                                .with_first_offset(f)
                                                .with_last_offset(l)
                                                .with_delivery_state(st)
                                                .with_delivery_count(n)
                                        })
                                        .collect(),
                                ),
                        ]),
                ]),
            0,
        )
        .await
        .unwrap();
    r.results[0].partitions[0].error_code
}

async fn initialize(c: &Connection, g: &str, topic: Uuid, epoch: i32, start: i64) -> i16 {
    let r = c
        .call_version(
            &InitializeShareGroupStateRequest::default()
                .with_group_id(s(g))
                .with_topics(vec![
                    initialize_share_group_state_request::InitializeStateData::default()
                        .with_topic_id(topic)
                        .with_partitions(vec![
                            initialize_share_group_state_request::PartitionData::default()
                                .with_partition(0)
                                .with_state_epoch(epoch)
                                .with_start_offset(start),
                        ]),
                ]),
            0,
        )
        .await
        .unwrap();
    r.results[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_state_apis_read_what_they_write() {
    let agent = tokio::task::spawn_blocking(|| common::Agent::start(&[]))
        .await
        .unwrap();
    let c = admin(&agent.bootstrap).await;
    let (t, g) = ("share-state", "share-state-group");
    let created = c
        .call_version(&common::create_topics_request(&[(t, 1)]), 7)
        .await
        .unwrap();
    let topic = created.topics[0].topic_id;
    assert_eq!(created.topics[0].error_code, 0);

    // A share group made by its first offset alteration.
    let altered = c
        .call_version(
            &AlterShareGroupOffsetsRequest::default()
                .with_group_id(GroupId(s(g)))
                .with_topics(vec![
                    alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(s(t)))
                        .with_partitions(vec![
                            alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(0)
                                .with_start_offset(2),
                            alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(9)
                                .with_start_offset(2),
                        ]),
                ]),
            0,
        )
        .await
        .unwrap();
    let codes: Vec<i16> = altered.responses[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!((altered.error_code, codes), (0, vec![0, 3]));
    assert_eq!(
        read_state(&c, g, topic, 0).await,
        "code 0 epoch 1 start 2 []"
    );

    // Kafka's persisted form: the leading acknowledged records are done.
    let batches = [(5, 7, 2, 1), (8, 9, 0, 2), (11, 11, 4, 5)];
    assert_eq!(write_state(&c, g, topic, 1, 5, &batches).await, 0);
    assert_eq!(
        read_state(&c, g, topic, 0).await,
        "code 0 epoch 1 start 8 [8-9:0x2 10-10:0x0 11-11:4x5]"
    );
    let summary = c
        .call_version(
            &ReadShareGroupStateSummaryRequest::default()
                .with_group_id(s(g))
                .with_topics(vec![
                    read_share_group_state_summary_request::ReadStateSummaryData::default()
                        .with_topic_id(topic)
                        .with_partitions(vec![
                            read_share_group_state_summary_request::PartitionData::default()
                                .with_partition(0),
                        ]),
                ]),
            0,
        )
        .await
        .unwrap();
    let p = &summary.results[0].partitions[0];
    assert_eq!((p.error_code, p.state_epoch, p.start_offset), (0, 1, 8));
    let described = c
        .call_version(
            &DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s(g)))
                    .with_topics(None),
            ]),
            0,
        )
        .await
        .unwrap();
    let d = &described.groups[0];
    assert_eq!(d.error_code, 0);
    assert_eq!(d.topics[0].topic_name.0.as_str(), t);
    assert_eq!(d.topics[0].partitions[0].start_offset, 8);

    // An older state epoch is fenced; malformed batches are refused.
    assert_eq!(write_state(&c, g, topic, 0, 0, &[]).await, 124);
    assert_eq!(initialize(&c, g, topic, 0, 0).await, 124);
    assert_eq!(write_state(&c, g, topic, 2, 0, &[(3, 2, 0, 0)]).await, 42);
    assert_eq!(write_state(&c, g, topic, 2, 0, &[(0, 1, 9, 0)]).await, 42);
    assert_eq!(initialize(&c, g, topic, 3, 4).await, 0);
    assert_eq!(
        read_state(&c, g, topic, 0).await,
        "code 0 epoch 3 start 4 []"
    );

    // Deleted: nothing to read; -1 initialises the same way.
    let deleted = c
        .call_version(
            &DeleteShareGroupStateRequest::default()
                .with_group_id(s(g))
                .with_topics(vec![
                    delete_share_group_state_request::DeleteStateData::default()
                        .with_topic_id(topic)
                        .with_partitions(vec![
                            delete_share_group_state_request::PartitionData::default()
                                .with_partition(0),
                        ]),
                ]),
            0,
        )
        .await
        .unwrap();
    assert_eq!(deleted.results[0].partitions[0].error_code, 0);
    assert_eq!(
        read_state(&c, g, topic, 0).await,
        "code 3 epoch 0 start -1 []"
    );
    assert_eq!(initialize(&c, g, topic, 4, -1).await, 0);
    assert_eq!(
        read_state(&c, g, Uuid::from_u128(0x5eed), 0).await,
        "code 3 epoch 0 start -1 []"
    );

    // The share coordinator of a share-partition: an agent.
    let found = c
        .call_version(
            &FindCoordinatorRequest::default()
                .with_key_type(2)
                .with_coordinator_keys(vec![s(&format!("{g}:{topic}:0")), s("bad")]),
            6,
        )
        .await
        .unwrap();
    assert_eq!(found.coordinators[0].error_code, 0);
    assert!(found.coordinators[0].node_id.0 >= 0);
    assert_eq!(found.coordinators[1].error_code, 42);
}
