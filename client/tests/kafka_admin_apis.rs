//! The administrative APIs of issue 18's first part, rutomq beside Apache
//! Kafka (one KRaft node from the Maven Central jars): both get the same
//! requests and must answer the same codes and values.
//!
//! - IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT, validate-only,
//!   each way Kafka refuses one) and AlterConfigs (the configs given
//!   replace the topic's own), read back with DescribeConfigs;
//! - DescribeTopicPartitions paged by its cursor, with unknown topics and a
//!   cursor outside the topics asked for;
//! - OffsetForLeaderEpoch: a fresh Kafka partition is at epoch 0 as every
//!   rutomq partition is, so both answer the log end for it, nothing for a
//!   later epoch, and UNKNOWN_LEADER_EPOCH to a client ahead of them;
//! - ElectLeaders (a single-replica partition's preferred replica leads
//!   already: ELECTION_NOT_NEEDED), ListPartitionReassignments (none),
//!   cancelling a reassignment that is not in progress, AlterReplicaLogDirs
//!   to a directory the broker does not have;
//! - CreateTopics with a manual replica assignment (the partition count
//!   from it) and each way Kafka refuses one;
//! - Produce v2, listed by ApiVersions for old librdkafka clients and
//!   answered UNSUPPORTED_VERSION per partition in its own layout.
//!
//! Then what rutomq answers differently on purpose (see the compatibility
//! result): a reassignment to new replicas is refused with
//! INVALID_REPLICA_ASSIGNMENT and why, and DescribeLogDirs reports one
//! virtual directory, the object store, with each partition's bytes there.

mod common;

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::s;
use common::scenarios::admin;
use datum_mq::native::conn::Connection;
use kafka_protocol::messages::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOPIC: i8 = 2;

fn topic_name(n: &str) -> TopicName {
    TopicName(s(n))
}

/// A config operation: name, op code, value.
type ConfigOp<'a> = (&'a str, i8, Option<&'a str>);

/// One resource of an IncrementalAlterConfigs request.
fn alter_resource(
    ty: i8,
    name: &str,
    ops: &[ConfigOp<'_>],
) -> incremental_alter_configs_request::AlterConfigsResource {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    AlterConfigsResource::default()
        .with_resource_type(ty)
        .with_resource_name(s(name))
        .with_configs(
            ops.iter()
                .map(|(n, op, v)| {
                    AlterableConfig::default()
                        .with_name(s(n))
                        .with_config_operation(*op)
                        .with_value(v.map(s))
                })
                .collect(),
        )
}

/// IncrementalAlterConfigs of topics: their operations each.
async fn incremental(
    c: &Connection,
    resources: &[(&str, &[ConfigOp<'_>])],
    validate_only: bool,
) -> String {
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(
            resources
                .iter()
                .map(|(topic, ops)| alter_resource(TOPIC, topic, ops))
                .collect(),
        );
    let resp = c.call_version(&req, 1).await.unwrap();
    let codes: Vec<String> = resp
        .responses
        .iter()
        .map(|r| format!("{}:{}", r.resource_name.as_str(), r.error_code))
        .collect();
    format!("incremental {}", codes.join(" "))
}

/// Kafka's broker applies a config change once its controller's record
/// reaches it, a moment after answering: a describe at once may show the
/// state before (rutomq's shows the change at once).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// DescribeConfigs of a topic's `keys`: value and source of each.
async fn described(c: &Connection, topic: &str, keys: &[&str]) -> String {
    settle().await;
    use describe_configs_request::DescribeConfigsResource;
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(s(topic))
            .with_configuration_keys(Some(keys.iter().map(|k| s(k)).collect()))]);
    let resp = c.call_version(&req, 4).await.unwrap();
    let r = &resp.results[0];
    let mut v: Vec<String> = r
        .configs
        .iter()
        .map(|e| {
            format!(
                "{}={} ({})",
                e.name.as_str(),
                e.value.as_deref().unwrap_or("null"),
                e.config_source
            )
        })
        .collect();
    v.sort();
    format!("describe {topic} {} {}", r.error_code, v.join(" "))
}

async fn alter_legacy(c: &Connection, topic: &str, configs: &[(&str, &str)]) -> String {
    format!(
        "alter {} {}",
        topic,
        legacy_code(c, TOPIC, topic, configs).await
    )
}

/// DescribeTopicPartitions: each topic's code and partitions, the cursor.
async fn pages(c: &Connection, topics: &[&str], limit: i32, cursor: Option<(&str, i32)>) -> String {
    use describe_topic_partitions_request::{Cursor, TopicRequest};
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(topic_name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(topic_name(t))
                .with_partition_index(p)
        }));
    let resp = c.call_version(&req, 0).await.unwrap();
    let topics: Vec<String> = resp
        .topics
        .iter()
        .map(|t| {
            let parts: Vec<String> = t
                .partitions
                .iter()
                .map(|p| {
                    format!(
                        "{}/e{}/r{}/i{}",
                        p.partition_index,
                        p.leader_epoch,
                        p.replica_nodes.len(),
                        p.isr_nodes.len()
                    )
                })
                .collect();
            format!(
                "{}:{}[{}]",
                t.name.as_deref().map_or("?", |n| n.as_str()),
                t.error_code,
                parts.join(",")
            )
        })
        .collect();
    let next = resp.next_cursor.map_or("-".to_owned(), |c| {
        format!("{}@{}", c.topic_name.as_str(), c.partition_index)
    });
    format!("pages {} next {next}", topics.join(" "))
}

/// OffsetForLeaderEpoch of one partition: (current epoch, epoch asked).
async fn epoch_end(
    c: &Connection,
    topic: &str,
    partition: i32,
    current: i32,
    epoch: i32,
) -> String {
    use offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current)
                .with_leader_epoch(epoch)])]);
    let resp = c.call_version(&req, 4).await.unwrap();
    let p = &resp.topics[0].partitions[0];
    format!(
        "epoch {topic}-{partition} current {current} asked {epoch}: {} epoch {} end {}",
        p.error_code, p.leader_epoch, p.end_offset
    )
}

async fn produce(c: &Connection, topic: &str, partition: i32) {
    use produce_request::{PartitionProduceData, TopicProduceData};
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(common::record_batch(Bytes::from_static(
                    b"v",
                ))))])]);
    let resp = c.call_version(&req, 9).await.unwrap();
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
}

async fn elect(c: &Connection, topics: Option<&[(&str, &[i32])]>) -> String {
    use elect_leaders_request::TopicPartitions;
    let req = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(10_000)
        .with_topic_partitions(topics.map(|ts| {
            ts.iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic(topic_name(t))
                        .with_partitions(ps.to_vec())
                })
                .collect()
        }));
    let resp = c.call_version(&req, 2).await.unwrap();
    let mut v: Vec<String> = resp
        .replica_election_results
        .iter()
        .flat_map(|t| {
            t.partition_result
                .iter()
                .map(move |p| format!("{}-{}:{}", t.topic.as_str(), p.partition_id, p.error_code))
        })
        .collect();
    v.sort();
    format!("elect {} [{}]", resp.error_code, v.join(" "))
}

/// AlterPartitionReassignments of one partition to `replicas`.
async fn reassign(
    c: &Connection,
    topic: &str,
    partition: i32,
    replicas: Option<Vec<i32>>,
) -> (i16, String) {
    use alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(partition)
                .with_replicas(
                    replicas.map(|r| r.into_iter().map(BrokerId).collect()),
                )])]);
    let resp = c.call_version(&req, 0).await.unwrap();
    let p = &resp.responses[0].partitions[0];
    let msg = p
        .error_message
        .as_ref()
        .map_or(String::new(), |m| m.to_string());
    (p.error_code, msg)
}

/// A Produce v2 request (one partition, one record batch) over a plain
/// socket: the codes of the v2 response.
async fn produce_v2(bootstrap: &str, topic: &str) -> String {
    let mut body = BytesMut::new();
    body.put_i16(0); // Produce
    body.put_i16(2);
    body.put_i32(42);
    body.put_i16(-1); // no client id
    body.put_i16(-1); // acks
    body.put_i32(10_000);
    body.put_i32(1);
    body.put_i16(topic.len() as i16);
    body.put_slice(topic.as_bytes());
    body.put_i32(1);
    body.put_i32(0);
    let batch = common::record_batch(Bytes::from_static(b"old"));
    body.put_i32(batch.len() as i32);
    body.put_slice(&batch);
    let mut sock = tokio::net::TcpStream::connect(bootstrap).await.unwrap();
    sock.write_all(&(body.len() as i32).to_be_bytes())
        .await
        .unwrap();
    sock.write_all(&body).await.unwrap();
    let n = match tokio::time::timeout(Duration::from_secs(10), sock.read_i32())
        .await
        .expect("a Produce v2 answer or a closed connection")
    {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return "closed".into(),
        Err(e) => panic!("Produce v2: {e}"),
    };
    let mut resp = vec![0; n as usize];
    sock.read_exact(&mut resp).await.unwrap();
    let mut r = Bytes::from(resp);
    let corr = r.get_i32();
    let topics = r.get_i32();
    let name_len = r.get_i16() as usize;
    let name = String::from_utf8_lossy(&r.split_to(name_len)).into_owned();
    let parts = r.get_i32();
    let (partition, code, base, append_time) = (r.get_i32(), r.get_i16(), r.get_i64(), r.get_i64());
    let throttle = r.get_i32();
    format!(
        "produce v2: corr {corr} topics {topics} {name} parts {parts} p{partition} code {code} base {base} \
         append {append_time} throttle {throttle} rest {}",
        r.remaining()
    )
}

/// CreateTopics of one topic with a manual assignment (partition, broker
/// ids), at the given partition count and factor: code, count, factor.
async fn create_assigned(
    c: &Connection,
    name: &str,
    partitions: i32,
    factor: i16,
    assignment: &[(i32, &[i32])],
) -> String {
    use create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(factor)
            .with_assignments(
                assignment
                    .iter()
                    .map(|(p, ids)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(*p)
                            .with_broker_ids(ids.iter().map(|&b| BrokerId(b)).collect())
                    })
                    .collect(),
            )]);
    let resp = c.call_version(&req, 7).await.unwrap();
    let t = &resp.topics[0];
    format!(
        "create assigned {}: {} partitions {} factor {}",
        &name[..name.find('-').unwrap_or(name.len())],
        t.error_code,
        t.num_partitions,
        t.replication_factor
    )
}

/// UpdateFeatures of one feature to `level` (an upgrade): top code and
/// each result's.
async fn update_feature(c: &Connection, feature: &str, level: i16, validate_only: bool) -> String {
    use update_features_request::FeatureUpdateKey;
    let req = UpdateFeaturesRequest::default()
        .with_timeout_ms(10_000)
        .with_validate_only(validate_only)
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(s(feature))
            .with_max_version_level(level)
            .with_upgrade_type(1)]);
    let resp = c.call_version(&req, 1).await.unwrap();
    let results: Vec<String> = resp
        .results
        .iter()
        .map(|r| format!("{}:{}", r.feature.as_str(), r.error_code))
        .collect();
    format!(
        "features {feature}={level}: {} [{}]",
        resp.error_code,
        results.join(" ")
    )
}

/// DescribeConfigs of BROKER `name`: code, and whether `num.partitions`
/// and `broker.id` are among its configs (read-only ones).
async fn broker_described(c: &Connection, name: &str) -> String {
    use describe_configs_request::DescribeConfigsResource;
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s(name))
            .with_configuration_keys(None)]);
    let resp = c.call_version(&req, 4).await.unwrap();
    let r = &resp.results[0];
    let has = |k: &str| {
        r.configs
            .iter()
            .any(|e| e.name.as_str() == k && e.read_only && e.value.is_some())
    };
    format!(
        "broker configs {name:?}: {} num.partitions {} broker.id {}",
        r.error_code,
        has("num.partitions"),
        has("broker.id"),
    )
}

/// The config requests of the script, one line per answer.
#[rustfmt::skip]
async fn config_script(c: &Connection, t: &str, u: &str) -> Vec<String> {
    let keys = ["retention.ms", "cleanup.policy", "max.message.bytes"];
    let (set, del, app, sub) = (0i8, 1i8, 2i8, 3i8);
    let mut out = Vec::new();
    out.push(incremental(c, &[(t, &[("retention.ms", set, Some("1234")), ("cleanup.policy", app, Some("compact"))])], false).await);
    out.push(described(c, t, &keys).await);
    out.push(incremental(c, &[(t, &[("cleanup.policy", sub, Some("delete"))])], false).await);
    out.push(described(c, t, &keys).await);
    out.push(incremental(c, &[(t, &[("retention.ms", del, None), ("max.message.bytes", set, Some("5000"))])], true).await);
    out.push(described(c, t, &keys).await);
    out.push(incremental(c, &[(t, &[("retention.ms", del, None), ("flush.ms", del, None)])], false).await);
    out.push(described(c, t, &keys).await);
    // Refusals: a bad value, APPEND to a non-list, an unknown name, a
    // config named twice, an unknown topic, a resource named twice.
    out.push(incremental(c, &[(t, &[("retention.ms", set, Some("-5"))])], false).await);
    out.push(incremental(c, &[(t, &[("retention.ms", app, Some("5"))])], false).await);
    out.push(incremental(c, &[(t, &[("no.such.config", set, Some("5"))])], false).await);
    out.push(incremental(c, &[(t, &[("retention.ms", set, Some("5")), ("retention.ms", del, None)])], false).await);
    out.push(incremental(c, &[("absent-topic", &[("retention.ms", set, Some("5"))])], false).await);
    out.push(incremental(c, &[(t, &[("retention.ms", set, Some("6"))]), (u, &[("retention.ms", set, Some("7"))]), (t, &[("retention.ms", set, Some("8"))])], false).await);
    out.push(described(c, t, &keys).await);
    out.push(described(c, u, &keys).await);
    // AlterConfigs: the configs given become all of the topic's own.
    out.push(alter_legacy(c, t, &[("retention.ms", "99000")]).await);
    out.push(described(c, t, &keys).await);
    out.push(alter_legacy(c, t, &[("retention.ms", "-7")]).await);
    out.push(alter_legacy(c, "absent-topic", &[("retention.ms", "1")]).await);
    out
}

/// IncrementalAlterConfigs of one resource of any type.
async fn incremental_of(c: &Connection, ty: i8, name: &str, ops: &[ConfigOp<'_>]) -> String {
    let req = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![alter_resource(ty, name, ops)]);
    let resp = c.call_version(&req, 1).await.unwrap();
    format!(
        "incremental {ty}/{name:?} {:?}: {}",
        ops.iter().map(|o| o.0).collect::<Vec<_>>(),
        resp.responses[0].error_code
    )
}

/// AlterConfigs (legacy) of one resource of any type: its error code.
async fn legacy_code(c: &Connection, ty: i8, name: &str, configs: &[(&str, &str)]) -> i16 {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let req = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(ty)
        .with_resource_name(s(name))
        .with_configs(
            configs
                .iter()
                .map(|(n, v)| {
                    AlterableConfig::default()
                        .with_name(s(n))
                        .with_value(Some(s(v)))
                })
                .collect(),
        )]);
    c.call_version(&req, 2).await.unwrap().responses[0].error_code
}

async fn legacy_of(c: &Connection, ty: i8, name: &str, configs: &[(&str, &str)]) -> String {
    format!(
        "legacy {ty}/{name:?}: {}",
        legacy_code(c, ty, name, configs).await
    )
}

/// DescribeConfigs of one resource of any type with synonyms: each
/// config's value, source, sensitivity and synonyms (`keys` or all).
async fn described_of(c: &Connection, ty: i8, name: &str, keys: Option<&[&str]>) -> String {
    settle().await;
    use describe_configs_request::DescribeConfigsResource;
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(ty)
            .with_resource_name(s(name))
            .with_configuration_keys(
                keys.map(|k| k.iter().map(|k| s(k)).collect()),
            )]);
    let resp = c.call_version(&req, 4).await.unwrap();
    let r = &resp.results[0];
    let mut v: Vec<String> = r
        .configs
        .iter()
        .map(|e| {
            let syn: Vec<String> = e
                .synonyms
                .iter()
                .map(|y| {
                    format!(
                        "{}:{}={}",
                        y.source,
                        y.name.as_str(),
                        y.value.as_deref().map_or("null", |v| v)
                    )
                })
                .collect();
            format!(
                "{}={} ({}{}{}) [{}]",
                e.name.as_str(),
                e.value.as_deref().map_or("null", |v| v),
                e.config_source,
                if e.is_sensitive { " sensitive" } else { "" },
                if e.read_only { " read-only" } else { "" },
                syn.join(", ")
            )
        })
        .collect();
    v.sort();
    format!("describe {ty}/{name:?} {} {}", r.error_code, v.join(" "))
}

/// ListConfigResources at `version` of `types`.
async fn listed_of(c: &Connection, version: i16, types: &[i8]) -> String {
    settle().await;
    let req = ListConfigResourcesRequest::default().with_resource_types(types.to_vec());
    let resp = c.call_version(&req, version).await.unwrap();
    let mut v: Vec<String> = resp
        .config_resources
        .iter()
        .map(|r| format!("{}/{}", r.resource_type, r.resource_name.as_str()))
        .collect();
    v.sort();
    format!(
        "list v{version} {types:?}: {} [{}]",
        resp.error_code,
        v.join(" ")
    )
}

/// Dynamic configs of brokers (one agent's and the cluster default),
/// groups and client-metrics subscriptions, one line per answer; `t` is a
/// topic that sets no configs of its own.
#[rustfmt::skip]
async fn dynamic_script(c: &Connection, t: &str, g: &str) -> Vec<String> {
    const BROKER: i8 = 4;
    const METRICS: i8 = 16;
    const GROUP: i8 = 32;
    let (set, del) = (0i8, 1i8);
    let mut out = Vec::new();
    out.push(incremental_of(c, BROKER, "1", &[("sasl.kerberos.min.time.before.relogin", set, Some("58000"))]).await);
    out.push(incremental_of(c, BROKER, "", &[("log.retention.ms", set, Some("1000000")), ("foo.bar", set, Some("1"))]).await);
    out.push(incremental_of(c, BROKER, "1", &[("num.partitions", set, Some("3"))]).await);
    out.push(incremental_of(c, BROKER, "", &[("log.retention.ms", set, Some("abc"))]).await);
    out.push(incremental_of(c, BROKER, "", &[("sasl.kerberos.min.time.before.relogin", set, Some("1"))]).await);
    out.push(incremental_of(c, BROKER, "", &[("message.max.bytes", set, Some("-1"))]).await);
    out.push(described_of(c, BROKER, "", Some(&["log.retention.ms", "foo.bar"])).await);
    out.push(described_of(c, BROKER, "1", Some(&["sasl.kerberos.min.time.before.relogin", "log.retention.ms", "foo.bar"])).await);
    out.push(described_of(c, 2, t, Some(&["retention.ms", "retention.bytes"])).await);
    out.push(legacy_of(c, BROKER, "1", &[("sasl.kerberos.min.time.before.relogin", "59000")]).await);
    out.push(described_of(c, BROKER, "1", Some(&["sasl.kerberos.min.time.before.relogin"])).await);
    out.push(incremental_of(c, BROKER, "", &[("log.retention.ms", del, None), ("foo.bar", del, None)]).await);
    out.push(incremental_of(c, BROKER, "1", &[("sasl.kerberos.min.time.before.relogin", del, None)]).await);
    out.push(described_of(c, BROKER, "", Some(&["log.retention.ms", "foo.bar"])).await);
    // (Kafka's synonyms of a topic config vary with its broker's history.)
    out.push(described(c, t, &["retention.ms"]).await);

    out.push(incremental_of(c, GROUP, g, &[("consumer.session.timeout.ms", set, Some("50000"))]).await);
    out.push(incremental_of(c, GROUP, g, &[("consumer.session.timeout.ms", set, Some("5000"))]).await);
    out.push(incremental_of(c, GROUP, g, &[("foo", set, Some("1"))]).await);
    out.push(incremental_of(c, GROUP, g, &[("consumer.heartbeat.interval.ms", set, Some("abc"))]).await);
    out.push(incremental_of(c, GROUP, g, &[("share.auto.offset.reset", set, Some("by_duration:PT1H"))]).await);
    let group_keys = ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.auto.offset.reset", "share.record.lock.duration.ms", "streams.session.timeout.ms"];
    out.push(described_of(c, GROUP, g, Some(&group_keys)).await);
    out.push(described_of(c, GROUP, "no-such-group", Some(&["consumer.session.timeout.ms"])).await);
    out.push(legacy_of(c, GROUP, g, &[("consumer.heartbeat.interval.ms", "6000")]).await);
    out.push(described_of(c, GROUP, g, Some(&group_keys)).await);

    const LOGGER: i8 = 8;
    out.push(described_of(c, LOGGER, "1", Some(&["root"])).await);
    out.push(incremental_of(c, LOGGER, "1", &[("root", set, Some("INFO"))]).await);
    out.push(incremental_of(c, LOGGER, "1", &[("root", del, None)]).await);
    out.push(incremental_of(c, LOGGER, "1", &[("root", set, Some("LOUD"))]).await);
    out.push(incremental_of(c, LOGGER, "1", &[("root", 2, Some("INFO"))]).await);
    out.push(incremental_of(c, LOGGER, "1", &[("nope.Logger", set, Some("DEBUG"))]).await);
    out.push(described_of(c, LOGGER, "7", Some(&["root"])).await);
    out.push(described_of(c, LOGGER, "", Some(&["root"])).await);
    out.push(incremental_of(c, METRICS, "cm1", &[("metrics", set, Some("org.apache.kafka.producer.")), ("interval.ms", set, Some("1000")), ("match", set, Some("client_id=a.*"))]).await);
    out.push(incremental_of(c, METRICS, "cm2", &[("interval.ms", set, Some("10"))]).await);
    out.push(incremental_of(c, METRICS, "cm2", &[("match", set, Some("foo=a"))]).await);
    out.push(incremental_of(c, METRICS, "cm2", &[("match", set, Some("client_id=("))]).await);
    out.push(incremental_of(c, METRICS, "cm2", &[("bar", set, Some("1"))]).await);
    out.push(described_of(c, METRICS, "cm1", None).await);
    out.push(listed_of(c, 0, &[]).await);
    out.push(listed_of(c, 1, &[METRICS]).await);
    out.push(listed_of(c, 1, &[GROUP]).await);
    out.push(listed_of(c, 1, &[BROKER, 8]).await);
    out.push(incremental_of(c, METRICS, "cm1", &[("metrics", del, None), ("interval.ms", del, None), ("match", del, None)]).await);
    out.push(listed_of(c, 1, &[METRICS]).await);
    out
}

/// The requests both brokers get, one line per answer.
async fn script(bootstrap: &str, run: &str) -> Vec<String> {
    let c = admin(bootstrap).await;
    let (t, u) = (format!("cfg-{run}"), format!("two-{run}"));
    let (t, u) = (t.as_str(), u.as_str());
    let created = c
        .call_version(&common::create_topics_request(&[(t, 3), (u, 2)]), 7)
        .await
        .unwrap();
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut out = config_script(&c, t, u).await;
    let (plain, g) = (format!("plain-{run}"), format!("grp-{run}"));
    let made = c
        .call_version(&common::create_topics_request(&[(&plain, 1)]), 7)
        .await
        .unwrap();
    assert_eq!(made.topics[0].error_code, 0);
    out.extend(
        dynamic_script(&c, &plain, &g)
            .await
            .into_iter()
            .map(|l| l.replace(run, "run")),
    );

    // Manual replica assignments: the one broker (id 1 on both) for each
    // partition; each way Kafka refuses one.
    let a = |n: &str| format!("{n}-{run}");
    out.push(create_assigned(&c, &a("asg"), -1, -1, &[(0, &[1]), (1, &[1]), (2, &[1])]).await);
    out.push(create_assigned(&c, &a("rf"), -1, 1, &[(0, &[1])]).await);
    out.push(create_assigned(&c, &a("np"), 1, -1, &[(0, &[1])]).await);
    out.push(create_assigned(&c, &a("twice"), -1, -1, &[(0, &[1]), (0, &[1])]).await);
    out.push(create_assigned(&c, &a("empty"), -1, -1, &[(0, &[])]).await);
    out.push(create_assigned(&c, &a("unknown"), -1, -1, &[(0, &[77])]).await);
    out.push(create_assigned(&c, &a("dup"), -1, -1, &[(0, &[1, 1])]).await);
    out.push(create_assigned(&c, &a("gap"), -1, -1, &[(0, &[1]), (2, &[1])]).await);
    out.push(pages(&c, &[&a("asg")], 10, None).await.replace(run, "run"));

    out.push(pages(&c, &[u, t], 2, None).await);
    out.push(pages(&c, &[u, t], 2, Some((t, 2))).await);
    out.push(pages(&c, &[u, t, "absent-topic"], 10, Some((u, 1))).await);
    out.push(pages(&c, &[t], 10, Some((u, 0))).await);

    for _ in 0..3 {
        produce(&c, t, 0).await;
    }
    out.push(epoch_end(&c, t, 0, -1, 0).await);
    out.push(epoch_end(&c, t, 0, 0, 0).await);
    out.push(epoch_end(&c, t, 1, -1, 0).await);
    out.push(epoch_end(&c, t, 0, -1, 3).await);
    out.push(epoch_end(&c, t, 0, 4, 0).await);
    out.push(epoch_end(&c, t, 7, -1, 0).await);
    out.push(epoch_end(&c, "absent-topic", 0, -1, 0).await);

    out.push(elect(&c, Some(&[(t, &[0, 2]), ("absent-topic", &[0])])).await);
    out.push(elect(&c, None).await);
    let listed = c
        .call_version(
            &ListPartitionReassignmentsRequest::default().with_timeout_ms(10_000),
            0,
        )
        .await
        .unwrap();
    out.push(format!(
        "reassignments {} {}",
        listed.error_code,
        listed.topics.len()
    ));
    out.push(format!("cancel {:?}", reassign(&c, t, 0, None).await.0));
    out.push(format!(
        "reassign absent {:?}",
        reassign(&c, "absent-topic", 0, Some(vec![1])).await.0
    ));
    let moved = c
        .call_version(
            &AlterReplicaLogDirsRequest::default().with_dirs(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                    .with_path(s("/no/such/dir"))
                    .with_topics(vec![
                        alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(vec![0]),
                    ]),
            ]),
            2,
        )
        .await
        .unwrap();
    for name in ["1", "", "7", "x"] {
        out.push(broker_described(&c, name).await);
    }
    out.push(update_feature(&c, "group.version", 1, false).await);
    out.push(update_feature(&c, "group.version", 1, true).await);
    out.push(update_feature(&c, "group.version", 9, false).await);
    out.push(update_feature(&c, "no.such.version", 3, false).await);
    out.push(format!(
        "move log dir {}",
        moved.results[0].partitions[0].error_code
    ));

    // ApiVersions v3+ names the client's software, as Kafka's pattern
    // allows (an empty name is an INVALID_REQUEST).
    for (name, version) in [
        ("", ""),
        ("librdkafka", "2.10.0"),
        ("bad name", "1"),
        ("a", "-1"),
    ] {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(s(name))
            .with_client_software_version(s(version));
        let versions = c.call_version(&req, 3).await.unwrap();
        let produce_range = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == 0)
            .map(|k| k.min_version);
        out.push(format!(
            "api versions {name:?} {version:?}: {} keys {} produce from {produce_range:?}",
            versions.error_code,
            versions.api_keys.len().min(1),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_apis_answer_as_apache_kafka_does() {
    let run = format!("{:x}", std::process::id());
    let kafka = tokio::task::spawn_blocking(common::Kafka::start)
        .await
        .unwrap();
    let k = script(&kafka.bootstrap, &run).await;
    let k_v2 = produce_v2(&kafka.bootstrap, &format!("cfg-{run}")).await;
    drop(kafka);

    let agent = tokio::task::spawn_blocking(|| common::Agent::start(&[]))
        .await
        .unwrap();
    let r = script(&agent.bootstrap, &run).await;

    eprintln!("--- Apache Kafka\n{}", k.join("\n"));
    let mut diff = String::new();
    for (a, b) in k.iter().zip(&r) {
        if a != b {
            diff.push_str(&format!("  kafka:  {a}\n  rutomq: {b}\n"));
        }
    }
    assert!(
        diff.is_empty() && k.len() == r.len(),
        "rutomq answers differently from Apache Kafka:\n{diff}--- rutomq\n{}",
        r.join("\n")
    );

    // What rutomq answers differently on purpose. Kafka 4 lists Produce
    // v0–2 and closes the connection of a client that uses one; rutomq
    // answers it, UNSUPPORTED_VERSION per partition, and writes nothing.
    let c = admin(&agent.bootstrap).await;
    let t = format!("cfg-{run}");
    assert_eq!(k_v2, "closed");
    let r_v2 = produce_v2(&agent.bootstrap, &t).await;
    assert_eq!(
        r_v2,
        format!("produce v2: corr 42 topics 1 {t} parts 1 p0 code 35 base -1 append -1 throttle 0 rest 0")
    );
    let before = r
        .iter()
        .find(|l| l.starts_with(&format!("epoch {t}-0 current -1 asked 0")));
    assert_eq!(
        Some(&epoch_end(&c, &t, 0, -1, 0).await),
        before,
        "Produce v2 wrote nothing"
    );
    let (code, msg) = reassign(&c, &t, 0, Some(vec![1])).await;
    assert_eq!(
        code, 39,
        "a reassignment to replicas is INVALID_REPLICA_ASSIGNMENT"
    );
    assert!(msg.contains("no replicas to move"), "{msg}");
    let dirs = c
        .call_version(&DescribeLogDirsRequest::default().with_topics(None), 4)
        .await
        .unwrap();
    assert_eq!(dirs.error_code, 0);
    assert_eq!(dirs.results.len(), 1, "one virtual log directory: {dirs:?}");
    let dir = &dirs.results[0];
    assert!(
        dir.log_dir.as_str().starts_with("file://"),
        "{:?}",
        dir.log_dir
    );
    assert_eq!((dir.total_bytes, dir.usable_bytes), (-1, -1));
    let mine = dir
        .topics
        .iter()
        .find(|x| x.name.as_str() == t)
        .expect("the topic is listed");
    let sizes: Vec<(i32, i64)> = mine
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    // One agent leads all three partitions; partition 0 holds three batches.
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    let batch = common::record_batch(Bytes::from_static(b"v")).len() as i64;
    assert_eq!(sizes[0], (0, 3 * batch), "{sizes:?}");
    assert!(sizes[1..].iter().all(|&(_, n)| n == 0), "{sizes:?}");
    tokio::task::spawn_blocking(move || drop(agent))
        .await
        .unwrap();
}
