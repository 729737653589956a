//! ACLs enforced API by API, rutomq beside Apache Kafka (one KRaft
//! node from the Maven Central jars, `StandardAuthorizer`): both get the
//! same requests from the same principal and must answer the same error
//! codes (and the same `authorized_operations`, listings and visible
//! topics).
//!
//! On each broker the PLAINTEXT listener's principal, `User:ANONYMOUS`, is
//! the super user (Kafka's own controller connection needs it); it makes
//! the topics and the user `alice` (SCRAM-SHA-512), who then speaks over
//! SASL_PLAINTEXT: first with no ACL at all (every API refused with
//! Kafka's TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or
//! the resource left out of a listing), then with READ and WRITE on one
//! topic, READ on one group, WRITE on one transactional id and DESCRIBE on
//! a topic prefix (exactly those allowed; a DENY for another host changes
//! nothing), then after DeleteAcls removed the topic's WRITE (refused
//! again at once on rutomq; Kafka is polled until its metadata has it).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use common::s;
use common::scenarios::admin;
use datum_mq::native::conn::Connection;
use datum_mq::native::sasl::{salted_password, ScramHash};
use datum_mq::{connect, SaslMechanism, Security};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Request;

const PASSWORD: &str = "alice-secret";
const ALICE: &str = "User:alice";

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

fn group(v: &str) -> GroupId {
    GroupId(s(v))
}

fn txn(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

/// The names one run uses (unique, so reruns on one Kafka do not meet).
struct Names {
    open: String,
    closed: String,
    prefix: String,
    g_open: String,
    g_closed: String,
    tx_open: String,
    tx_closed: String,
}

impl Names {
    fn new() -> Names {
        let run = format!("{:x}", std::process::id());
        Names {
            open: format!("acl-open-{run}"),
            closed: format!("acl-closed-{run}"),
            prefix: format!("acl-pre-{run}-"),
            g_open: format!("acl-g-open-{run}"),
            g_closed: format!("acl-g-closed-{run}"),
            tx_open: format!("acl-tx-open-{run}"),
            tx_closed: format!("acl-tx-closed-{run}"),
        }
    }
}

async fn add_alice(plaintext: &str) {
    let conn = admin(plaintext).await;
    let salt = b"salt-of-alice".to_vec();
    let upsert = alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
        .with_name(s("alice"))
        .with_mechanism(2)
        .with_iterations(4096)
        .with_salt(Bytes::from(salt.clone()))
        .with_salted_password(Bytes::from(salted_password(
            ScramHash::Sha512,
            PASSWORD,
            &salt,
            4096,
        )));
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert]);
    let resp = conn.call_version(&req, 0).await.unwrap();
    assert!(resp.results.iter().all(|r| r.error_code == 0), "{resp:?}");
}

async fn alice(sasl: &str) -> Connection {
    let sec = Security::SaslPlaintext(SaslMechanism::ScramSha512 {
        username: "alice".into(),
        password: PASSWORD.into(),
    });
    // Kafka may need a moment to learn a new SCRAM user.
    for _ in 0..50 {
        if let Ok(c) = connect(sasl, &sec, "acl-test", Duration::from_secs(10)).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("alice cannot log in at {sasl}");
}

async fn create_topics(conn: &Connection, names: &[&str]) {
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (*n, 1)).collect();
    let req = common::create_topics_request(&topics);
    let resp = conn.call_version(&req, 7).await.unwrap();
    assert!(resp.topics.iter().all(|t| t.error_code == 0), "{resp:?}");
}

fn acl(
    resource_type: i8,
    name: &str,
    pattern: i8,
    operation: i8,
    permission: i8,
    host: &str,
) -> create_acls_request::AclCreation {
    create_acls_request::AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(ALICE))
        .with_host(s(host))
        .with_operation(operation)
        .with_permission_type(permission)
}

/// The ACLs of the second phase.
fn grants(n: &Names) -> Vec<create_acls_request::AclCreation> {
    const TOPIC: i8 = 2;
    const GROUP: i8 = 3;
    const TXN: i8 = 5;
    const LITERAL: i8 = 3;
    const PREFIXED: i8 = 4;
    const ALLOW: i8 = 3;
    const DENY: i8 = 2;
    const READ: i8 = 3;
    const WRITE: i8 = 4;
    const DESCRIBE: i8 = 8;
    const ALL: i8 = 2;
    vec![
        acl(TOPIC, &n.open, LITERAL, READ, ALLOW, "*"),
        acl(TOPIC, &n.open, LITERAL, WRITE, ALLOW, "*"),
        acl(TOPIC, &n.prefix, PREFIXED, DESCRIBE, ALLOW, "*"),
        acl(GROUP, &n.g_open, LITERAL, READ, ALLOW, "*"),
        acl(TXN, &n.tx_open, LITERAL, WRITE, ALLOW, "*"),
        // Another host: it must not touch alice at 127.0.0.1.
        acl(TOPIC, &n.open, LITERAL, ALL, DENY, "10.9.9.9"),
    ]
}

async fn create_acls(conn: &Connection, acls: Vec<create_acls_request::AclCreation>) {
    let req = CreateAclsRequest::default().with_creations(acls);
    let resp = conn.call_version(&req, 3).await.unwrap();
    assert!(resp.results.iter().all(|r| r.error_code == 0), "{resp:?}");
}

/// Deletes alice's WRITE on the open topic; how many bindings went.
async fn delete_write(conn: &Connection, n: &Names) -> usize {
    let f = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s(&n.open)))
        .with_pattern_type_filter(3)
        .with_principal_filter(Some(s(ALICE)))
        .with_host_filter(None)
        .with_operation(4)
        .with_permission_type(3);
    let resp = conn
        .call_version(&DeleteAclsRequest::default().with_filters(vec![f]), 3)
        .await
        .unwrap();
    let r = &resp.filter_results[0];
    assert_eq!(r.error_code, 0, "{resp:?}");
    r.matching_acls.len()
}

fn batch() -> Bytes {
    common::record_batch(Bytes::from_static(b"v"))
}

/// Every API alice may call, as one line each: what was asked, the error
/// codes (and listings) answered. Identical lines on both brokers is the
/// check.
async fn observe(c: &Connection, n: &Names) -> Vec<String> {
    let mut out = Vec::new();
    let both = [n.open.as_str(), n.closed.as_str()];

    // Metadata: named topics (a missing one under the prefix), then all.
    let missing = format!("{}missing", n.prefix);
    let req = MetadataRequest::default()
        .with_topics(Some(
            [n.open.as_str(), n.closed.as_str(), missing.as_str()]
                .iter()
                .map(|t| {
                    metadata_request::MetadataRequestTopic::default().with_name(Some(topic(t)))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(false)
        .with_include_topic_authorized_operations(true);
    let r = ask(c, &req, 12).await;
    let mut named: Vec<String> = r
        .topics
        .iter()
        .map(|t| {
            format!(
                "{}={}/ops {:#x}",
                t.name.as_ref().map_or("?", |x| x.0.as_str()),
                t.error_code,
                t.topic_authorized_operations
            )
        })
        .collect();
    named.sort();
    out.push(format!("Metadata named: {named:?}"));
    let r = ask(c, &MetadataRequest::default().with_topics(None), 12).await;
    let mut all: Vec<&str> = r
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|x| x.0.as_str()))
        .filter(|t| t.starts_with("acl-"))
        .collect();
    all.sort();
    out.push(format!("Metadata all: {all:?}"));

    // Auto-creation needs CREATE.
    let auto = format!("{}auto", n.prefix);
    let r = ask(
        c,
        &MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(topic(&auto)))]))
            .with_allow_auto_topic_creation(true),
        12,
    )
    .await;
    out.push(format!("Metadata auto-create: {}", r.topics[0].error_code));

    // Produce, Fetch, ListOffsets per topic.
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(
            both.iter()
                .map(|t| {
                    produce_request::TopicProduceData::default()
                        .with_name(topic(t))
                        .with_partition_data(vec![produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(batch()))])
                })
                .collect(),
        );
    let r = ask(c, &req, 9).await;
    out.push(format!(
        "Produce: {:?}",
        r.responses
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_responses[0].error_code))
            .collect::<BTreeSet<_>>()
    ));
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(
            both.iter()
                .map(|t| {
                    fetch_request::FetchTopic::default()
                        .with_topic(topic(t))
                        .with_partitions(vec![fetch_request::FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)])
                })
                .collect(),
        );
    let r = ask(c, &req, 12).await;
    out.push(format!(
        "Fetch: {:?}",
        r.responses
            .iter()
            .map(|t| (t.topic.0.to_string(), t.partitions[0].error_code))
            .collect::<BTreeSet<_>>()
    ));
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            both.iter()
                .map(|t| {
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(topic(t))
                        .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default(
                        )
                        .with_partition_index(0)
                        .with_timestamp(-1)])
                })
                .collect(),
        );
    let r = ask(c, &req, 7).await;
    out.push(format!(
        "ListOffsets: {:?}",
        r.topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
            .collect::<BTreeSet<_>>()
    ));

    // Coordinators.
    for (key_type, keys) in [
        (0i8, [&n.g_open, &n.g_closed]),
        (1, [&n.tx_open, &n.tx_closed]),
    ] {
        let req = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(keys.iter().map(|k| s(k)).collect());
        let r = ask(c, &req, 4).await;
        out.push(format!(
            "FindCoordinator {key_type}: {:?}",
            r.coordinators
                .iter()
                .map(|x| x.error_code)
                .collect::<Vec<_>>()
        ));
    }

    // Groups.
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group(&n.g_open))
        .with_member_id(s("m-acl-test-0000000000"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![topic(&n.open), topic(&n.closed)]))
        .with_topic_partitions(Some(Vec::new()));
    let r = ask(c, &req, 0).await;
    out.push(format!(
        "ConsumerGroupHeartbeat open group, a closed topic: {}",
        r.error_code
    ));
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group(&n.g_closed))
        .with_member_id(s("m-acl-test-0000000001"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![topic(&n.open)]))
        .with_topic_partitions(Some(Vec::new()));
    let r = ask(c, &req, 0).await;
    out.push(format!(
        "ConsumerGroupHeartbeat closed group: {}",
        r.error_code
    ));
    for g in [&n.g_open, &n.g_closed] {
        let req = JoinGroupRequest::default()
            .with_group_id(group(g))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(""))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))]);
        let r = ask(c, &req, 9).await;
        out.push(format!("JoinGroup {}: {}", tag(n, g), r.error_code));
    }
    let r = ask(
        c,
        &SyncGroupRequest::default()
            .with_group_id(group(&n.g_closed))
            .with_member_id(s("m"))
            .with_generation_id(1)
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range"))),
        5,
    )
    .await;
    out.push(format!("SyncGroup closed: {}", r.error_code));
    let r = ask(
        c,
        &HeartbeatRequest::default()
            .with_group_id(group(&n.g_closed))
            .with_member_id(s("m"))
            .with_generation_id(1),
        4,
    )
    .await;
    out.push(format!("Heartbeat closed: {}", r.error_code));
    let r = ask(
        c,
        &LeaveGroupRequest::default()
            .with_group_id(group(&n.g_closed))
            .with_members(vec![
                leave_group_request::MemberIdentity::default().with_member_id(s("m"))
            ]),
        5,
    )
    .await;
    out.push(format!("LeaveGroup closed: {}", r.error_code));
    for g in [&n.g_open, &n.g_closed] {
        let req = OffsetCommitRequest::default()
            .with_group_id(group(g))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(
                both.iter()
                    .map(|t| {
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(topic(t))
                            .with_partitions(vec![
                                offset_commit_request::OffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(0),
                            ])
                    })
                    .collect(),
            );
        let r = ask(c, &req, 8).await;
        out.push(format!(
            "OffsetCommit {}: {:?}",
            tag(n, g),
            r.topics
                .iter()
                .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
                .collect::<BTreeSet<_>>()
        ));
    }
    for (label, topics) in [("named", Some(both.to_vec())), ("all", None::<Vec<&str>>)] {
        let req = OffsetFetchRequest::default().with_groups(
            [&n.g_open, &n.g_closed]
                .iter()
                .map(|g| {
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group(g))
                        .with_topics(topics.as_ref().map(|ts| {
                            ts.iter()
                                .map(|t| {
                                    offset_fetch_request::OffsetFetchRequestTopics::default()
                                        .with_name(topic(t))
                                        .with_partition_indexes(vec![0])
                                })
                                .collect()
                        }))
                })
                .collect(),
        );
        let r = ask(c, &req, 8).await;
        let groups: Vec<String> = r
            .groups
            .iter()
            .map(|g| {
                let mut topics: Vec<String> = g
                    .topics
                    .iter()
                    .map(|t| format!("{}:{}", t.name.0, t.partitions[0].error_code))
                    .collect();
                topics.sort();
                format!("{}={} {topics:?}", tag(n, &g.group_id.0), g.error_code)
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        out.push(format!("OffsetFetch {label}: {groups:?}"));
    }
    let r = ask(
        c,
        &DescribeGroupsRequest::default()
            .with_groups(vec![group(&n.g_open), group(&n.g_closed)])
            .with_include_authorized_operations(true),
        5,
    )
    .await;
    out.push(format!(
        "DescribeGroups: {:?}",
        r.groups
            .iter()
            .map(|g| format!(
                "{}={} ops {:#x}",
                tag(n, &g.group_id.0),
                g.error_code,
                g.authorized_operations
            ))
            .collect::<BTreeSet<_>>()
    ));
    let r = ask(c, &ListGroupsRequest::default(), 4).await;
    let listed = ours(n, r.groups.iter().map(|g| g.group_id.0.as_str()));
    out.push(format!("ListGroups: {} {listed:?}", r.error_code));
    let r = ask(
        c,
        &DeleteGroupsRequest::default().with_groups_names(vec![group(&n.g_closed)]),
        2,
    )
    .await;
    out.push(format!("DeleteGroups closed: {}", r.results[0].error_code));
    let r = ask(
        c,
        &OffsetDeleteRequest::default()
            .with_group_id(group(&n.g_closed))
            .with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(topic(&n.open))
                    .with_partitions(vec![
                        offset_delete_request::OffsetDeleteRequestPartition::default()
                            .with_partition_index(0),
                    ]),
            ]),
        0,
    )
    .await;
    out.push(format!("OffsetDelete closed: {}", r.error_code));

    // Producers and transactions.
    let r = ask(
        c,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        4,
    )
    .await;
    out.push(format!("InitProducerId idempotent: {}", r.error_code));
    let mut open_pid = None;
    for id in [&n.tx_open, &n.tx_closed] {
        let r = ask(
            c,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await;
        out.push(format!("InitProducerId {}: {}", tag(n, id), r.error_code));
        if id == &n.tx_open && r.error_code == 0 {
            open_pid = Some((r.producer_id, r.producer_epoch));
        }
    }
    let (pid, epoch) = open_pid.unwrap_or((ProducerId(1), 0));
    for id in [&n.tx_open, &n.tx_closed] {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn(id))
            .with_v3_and_below_producer_id(pid)
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(
                both.iter()
                    .map(|t| {
                        add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                            .with_name(topic(t))
                            .with_partitions(vec![0])
                    })
                    .collect(),
            );
        let r = ask(c, &req, 3).await;
        let mut codes: Vec<String> = r
            .results_by_topic_v3_and_below
            .iter()
            .map(|t| {
                format!(
                    "{}:{}",
                    t.name.0, t.results_by_partition[0].partition_error_code
                )
            })
            .collect();
        codes.sort();
        out.push(format!("AddPartitionsToTxn {}: {codes:?}", tag(n, id)));
        let r = ask(
            c,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn(id))
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_group_id(group(&n.g_closed)),
            3,
        )
        .await;
        out.push(format!(
            "AddOffsetsToTxn {} closed group: {}",
            tag(n, id),
            r.error_code
        ));
        let r = ask(
            c,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn(id))
                .with_group_id(group(&n.g_closed))
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_member_id(s(""))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic(&n.open))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(0),
                        ]),
                ]),
            3,
        )
        .await;
        out.push(format!(
            "TxnOffsetCommit {} closed group: {}",
            tag(n, id),
            r.topics[0].partitions[0].error_code
        ));
    }
    // The open transaction ends (committing the one partition it may add).
    for id in [&n.tx_closed, &n.tx_open] {
        let r = ask(
            c,
            &EndTxnRequest::default()
                .with_transactional_id(txn(id))
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_committed(false),
            3,
        )
        .await;
        out.push(format!("EndTxn {}: {}", tag(n, id), r.error_code));
    }
    let r = ask(
        c,
        &DescribeTransactionsRequest::default().with_transactional_ids(vec![txn(&n.tx_closed)]),
        0,
    )
    .await;
    out.push(format!(
        "DescribeTransactions closed: {}",
        r.transaction_states[0].error_code
    ));
    let r = ask(
        c,
        &ListTransactionsRequest::default().with_duration_filter(-1),
        1,
    )
    .await;
    let ids = ours(
        n,
        r.transaction_states
            .iter()
            .map(|t| t.transactional_id.0.as_str()),
    );
    out.push(format!("ListTransactions: {} {ids:?}", r.error_code));
    let r = ask(
        c,
        &DescribeProducersRequest::default().with_topics(
            both.iter()
                .map(|t| {
                    describe_producers_request::TopicRequest::default()
                        .with_name(topic(t))
                        .with_partition_indexes(vec![0])
                })
                .collect(),
        ),
        0,
    )
    .await;
    out.push(format!(
        "DescribeProducers: {:?}",
        r.topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
            .collect::<BTreeSet<_>>()
    ));
    let r = ask(
        c,
        &WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(topic(&n.open))
                        .with_partition_indexes(vec![0]),
                ]),
        ]),
        1,
    )
    .await;
    out.push(format!(
        "WriteTxnMarkers: {}",
        r.markers[0].topics[0].partitions[0].error_code
    ));

    // Topic administration (never allowed to alice here).
    let r = ask(
        c,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_validate_only(true)
            .with_topics(vec![create_topics_request::CreatableTopic::default()
                .with_name(topic(&format!("{}new", n.prefix)))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
        7,
    )
    .await;
    out.push(format!("CreateTopics: {}", r.topics[0].error_code));
    let r = ask(
        c,
        &DeleteTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topic_names(vec![topic(&n.closed)]),
        5,
    )
    .await;
    out.push(format!(
        "DeleteTopics closed: {}",
        r.responses[0].error_code
    ));
    let r = ask(
        c,
        &CreatePartitionsRequest::default()
            .with_timeout_ms(10_000)
            .with_validate_only(true)
            .with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(topic(&n.open))
                    .with_count(4)
                    .with_assignments(None),
            ]),
        3,
    )
    .await;
    out.push(format!(
        "CreatePartitions open: {}",
        r.results[0].error_code
    ));
    let r = ask(
        c,
        &DeleteRecordsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                .with_name(topic(&n.open))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(0),
                ])]),
        2,
    )
    .await;
    out.push(format!(
        "DeleteRecords open: {}",
        r.topics[0].partitions[0].error_code
    ));
    let r = ask(
        c,
        &DescribeConfigsRequest::default().with_resources(
            both.iter()
                .map(|t| {
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s(t))
                })
                .collect(),
        ),
        4,
    )
    .await;
    out.push(format!(
        "DescribeConfigs: {:?}",
        r.results.iter().map(|x| x.error_code).collect::<Vec<_>>()
    ));

    // The cluster: ACLs, credentials, authorized operations.
    let r = ask(
        c,
        &DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1),
        3,
    )
    .await;
    out.push(format!("DescribeAcls: {}", r.error_code));
    let r = ask(
        c,
        &CreateAclsRequest::default().with_creations(vec![acl(2, "x", 3, 3, 3, "*")]),
        3,
    )
    .await;
    out.push(format!("CreateAcls: {}", r.results[0].error_code));
    let r = ask(
        c,
        &DeleteAclsRequest::default().with_filters(vec![
            delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ]),
        3,
    )
    .await;
    out.push(format!("DeleteAcls: {}", r.filter_results[0].error_code));
    let r = ask(c, &DescribeUserScramCredentialsRequest::default(), 0).await;
    out.push(format!("DescribeUserScramCredentials: {}", r.error_code));
    let r = ask(
        c,
        &AlterUserScramCredentialsRequest::default().with_deletions(vec![
            alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                .with_name(s("alice"))
                .with_mechanism(2),
        ]),
        0,
    )
    .await;
    out.push(format!(
        "AlterUserScramCredentials: {}",
        r.results[0].error_code
    ));
    let r = ask(
        c,
        &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
        1,
    )
    .await;
    out.push(format!(
        "DescribeCluster: {} ops {:#x}",
        r.error_code, r.cluster_authorized_operations
    ));
    out
}

/// Sends `req` at `version`; its response.
async fn ask<R: Request>(c: &Connection, req: &R, version: i16) -> R::Response {
    c.call_version(req, version).await.unwrap()
}

/// The run's own names among `names` (groups or transactional ids), as
/// run-independent labels, sorted.
fn ours<'a>(n: &Names, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = names
        .filter(|x| x.starts_with("acl-"))
        .map(|x| tag(n, x))
        .collect();
    v.sort();
    v
}

/// A run-independent name for one of the run's groups or ids.
fn tag(n: &Names, v: &str) -> String {
    for (name, label) in [
        (&n.g_open, "g-open"),
        (&n.g_closed, "g-closed"),
        (&n.tx_open, "tx-open"),
        (&n.tx_closed, "tx-closed"),
    ] {
        if v == name.as_str() {
            return label.to_owned();
        }
    }
    v.to_owned()
}

/// The two brokers' lines side by side where they differ.
fn compare(phase: &str, kafka: &[String], rutomq: &[String]) {
    let mut diff = String::new();
    for (k, r) in kafka.iter().zip(rutomq) {
        if k != r {
            diff.push_str(&format!("  kafka:  {k}\n  rutomq: {r}\n"));
        }
    }
    assert!(
        diff.is_empty() && kafka.len() == rutomq.len(),
        "{phase}: rutomq answers differently from Apache Kafka:\n{diff}"
    );
}

/// The three phases on one broker (PLAINTEXT bootstrap, SASL address).
async fn phases(plaintext: &str, sasl: &str) -> [Vec<String>; 3] {
    let n = Names::new();
    let root = admin(plaintext).await;
    add_alice(plaintext).await;
    create_topics(&root, &[&n.open, &n.closed]).await;
    common::scenarios::produce(plaintext, &n.open, 3).await;
    warm_up(&root).await;
    let c = alice(sasl).await;
    let none = observe(&c, &n).await;
    create_acls(&root, grants(&n)).await;
    produce_answers(&c, &n.open, 0).await;
    let granted = observe(&c, &n).await;
    assert_eq!(delete_write(&root, &n).await, 1);
    produce_answers(&c, &n.open, 29).await;
    let mut revoked = observe(&c, &n).await;
    // The super user's view of a group: every group operation.
    let r = ask(
        &root,
        &DescribeGroupsRequest::default()
            .with_groups(vec![group(&n.g_open)])
            .with_include_authorized_operations(true),
        5,
    )
    .await;
    revoked.push(format!(
        "DescribeGroups as the super user: {} ops {:#x}",
        r.groups[0].error_code, r.groups[0].authorized_operations
    ));
    [none, granted, revoked]
}

/// Waits until the broker's group and transaction coordinators answer (a
/// fresh Kafka creates their topics on first use, answering
/// COORDINATOR_NOT_AVAILABLE meanwhile).
async fn warm_up(root: &Connection) {
    for _ in 0..300 {
        let mut ready = true;
        for key_type in [0i8, 1] {
            let req = FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![s("acl-warm-up")]);
            let r = root.call_version(&req, 4).await.unwrap();
            ready &= r.coordinators[0].error_code == 0;
        }
        let r = root
            .call_version(
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(txn("acl-warm-up")))
                    .with_transaction_timeout_ms(60_000),
                4,
            )
            .await
            .unwrap();
        ready &= r.error_code == 0;
        let r = root
            .call_version(
                &OffsetFetchRequest::default().with_groups(vec![
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group("acl-warm-up")),
                ]),
                8,
            )
            .await
            .unwrap();
        ready &= r.groups[0].error_code == 0;
        if ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the coordinators never answered");
}

/// Waits until alice's produce to `topic_name` answers `code` (Kafka
/// applies an ACL change once its metadata log reaches the broker).
async fn produce_answers(c: &Connection, topic_name: &str, code: i16) {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic(topic_name))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch())),
            ])]);
    let mut last = -1;
    for _ in 0..100 {
        let r = ask(c, &req, 9).await;
        last = r.responses[0].partition_responses[0].error_code;
        if last == code {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("produce to {topic_name} still answers {last}, not {code}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_are_enforced_as_apache_kafka_enforces_them() {
    let sasl_port = common::free_port();
    let kafka = tokio::task::spawn_blocking(move || {
        common::Kafka::start_with(|port, cport| {
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport},SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
                 sasl.enabled.mechanisms=SCRAM-SHA-512\n\
                 listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
                 authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
                 super.users=User:ANONYMOUS\n\
                 auto.create.topics.enable=true\n"
            )
        })
    })
    .await
    .unwrap();
    let k = phases(&kafka.bootstrap, &format!("127.0.0.1:{sasl_port}")).await;
    drop(kafka);

    let sasl_port = common::free_port();
    let agent = tokio::task::spawn_blocking(move || {
        common::Agent::start_with(|plaintext| {
            vec![
                "--listeners".to_owned(),
                format!("PLAINTEXT://{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
                "--authorizer".to_owned(),
                "acl".to_owned(),
                "--super-users".to_owned(),
                "User:ANONYMOUS".to_owned(),
            ]
        })
    })
    .await
    .unwrap();
    let r = phases(&agent.bootstrap, &format!("127.0.0.1:{sasl_port}")).await;
    tokio::task::spawn_blocking(move || drop(agent))
        .await
        .unwrap();
    for (i, phase) in ["no ACLs", "granted", "WRITE revoked"].iter().enumerate() {
        eprintln!("--- {phase} (Apache Kafka)\n{}", k[i].join("\n"));
        compare(phase, &k[i], &r[i]);
    }
}
