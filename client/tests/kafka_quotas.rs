//! Client quotas, rutomq beside Apache Kafka (one KRaft node from the
//! Maven Central jars): both get the same AlterClientQuotas and
//! DescribeClientQuotas requests — valid ones, and each way Kafka refuses
//! an entity, a key, a value or a filter — and must answer the same codes,
//! messages and listings. Then each throttles a fresh client the same way:
//! a Produce over its `producer_byte_rate` and a Fetch over its
//! `consumer_byte_rate` get the same `throttle_time_ms` from both (the
//! first request of a sensor is measured over Kafka's minimum window, so
//! the figure is deterministic), the throttled Fetch is answered empty, and
//! the connection is muted: a request sent right after a throttled one is
//! answered only once the throttle time has passed. And a client over its
//! `controller_mutation_rate` is refused topics (strict versions) or only
//! throttled (older ones) as Kafka does, with the same throttle times.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::s;
use common::scenarios::admin;
use datum_mq::native::conn::Connection;
use datum_mq::{connect, Security};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// An entity part: type, name (`None` for `<default>`).
type Part<'a> = (&'a str, Option<&'a str>);
/// An op: key, `Some(value)` to set, `None` to remove.
type Op<'a> = (&'a str, Option<f64>);

/// An entry: entity parts and ops.
fn entry(entity: &[Part], ops: &[Op]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

/// An entity as one sorted line.
fn entity_line<'a>(parts: impl Iterator<Item = (&'a StrBytes, Option<&'a StrBytes>)>) -> String {
    let mut v: Vec<String> = parts
        .map(|(t, n)| format!("{t}={}", n.map_or("<default>", |n| n.as_str())))
        .collect();
    v.sort();
    v.join(",")
}

/// AlterClientQuotas: one line per entity answered, sorted.
async fn alter(c: &Connection, entries: Vec<EntryData>, validate_only: bool) -> String {
    let req = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    let resp = c.call_version(&req, 1).await.unwrap();
    let mut lines: Vec<String> = resp
        .entries
        .iter()
        .map(|e| {
            format!(
                "[{}] {} {}",
                entity_line(
                    e.entity
                        .iter()
                        .map(|p| (&p.entity_type, p.entity_name.as_ref()))
                ),
                e.error_code,
                e.error_message.as_ref().map_or("-", |m| m.as_str())
            )
        })
        .collect();
    lines.sort();
    lines.join(" | ")
}

/// A filter component: entity type, match type, match string.
type Component<'a> = (&'a str, i8, Option<&'a str>);

/// DescribeClientQuotas with components (type, match type, match): the
/// error, or the matched entities of this run with their values, sorted.
async fn describe(
    c: &Connection,
    run: &str,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> String {
    let req = DescribeClientQuotasRequest::default()
        .with_components(
            components
                .iter()
                .map(|(t, m, v)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(*m)
                        .with_match(v.map(s))
                })
                .collect(),
        )
        .with_strict(strict);
    let resp = c.call_version(&req, 1).await.unwrap();
    if resp.error_code != 0 {
        return format!(
            "error {} {} entries {}",
            resp.error_code,
            resp.error_message.as_ref().map_or("-", |m| m.as_str()),
            if resp.entries.is_none() {
                "null"
            } else {
                "present"
            }
        );
    }
    let mut lines: Vec<String> = resp
        .entries
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let mut values: Vec<String> = e
                .values
                .iter()
                .map(|v| format!("{}={}", v.key, v.value))
                .collect();
            values.sort();
            format!(
                "[{}] {}",
                entity_line(
                    e.entity
                        .iter()
                        .map(|p| (&p.entity_type, p.entity_name.as_ref()))
                ),
                values.join(",")
            )
        })
        // Defaults, this run's names and this run's IP: other runs' and
        // other tests' entities are left out.
        .filter(|l| l.contains(run) || l.contains("<default>") || l.contains("127.0.0.9"))
        .collect();
    lines.sort();
    lines.join(" | ")
}

/// The admin exchange on one broker, as lines.
async fn admin_lines(c: &Connection, run: &str) -> Vec<String> {
    let alice = format!("alice-{run}");
    let c1 = format!("c1-{run}");
    let (a, c1) = (alice.as_str(), c1.as_str());
    let user = |n| ("user", Some(n));
    let mut out = Vec::new();
    let ip = |n| ("ip", Some(n));
    let client = |n| ("client-id", Some(n));
    let set = |k, v| (k, Some(v));
    // (what, entity, ops, validate only): one entry each.
    #[rustfmt::skip]
    let requests: Vec<(&str, Vec<Part>, Vec<Op>, bool)> = vec![
        ("user rates", vec![user(a)], vec![set("producer_byte_rate", 1024.0), set("consumer_byte_rate", 2048.0)], false),
        ("user and client", vec![user(a), client(c1)], vec![set("producer_byte_rate", 4096.0), set("request_percentage", 0.25)], false),
        ("user and default client", vec![user(a), ("client-id", None)], vec![set("controller_mutation_rate", 5.5)], false),
        ("ip", vec![ip("127.0.0.9")], vec![set("connection_creation_rate", 10.0)], false),
        ("empty entity", vec![], vec![set("producer_byte_rate", 1.0)], false),
        ("empty user", vec![user("")], vec![set("producer_byte_rate", 1.0)], false),
        ("unknown type", vec![("topic", Some("t"))], vec![set("producer_byte_rate", 1.0)], false),
        ("bad ip", vec![ip("no-such-host.invalid")], vec![set("connection_creation_rate", 1.0)], false),
        ("ip with user", vec![ip("127.0.0.9"), user(a)], vec![set("connection_creation_rate", 1.0)], false),
        ("unknown key", vec![user(a)], vec![set("bogus_rate", 1.0)], false),
        ("ip key on a user", vec![user(a)], vec![set("connection_creation_rate", 1.0)], false),
        ("user key on an ip", vec![ip("127.0.0.9")], vec![set("producer_byte_rate", 1.0)], false),
        ("zero", vec![user(a)], vec![set("consumer_byte_rate", 0.0)], false),
        ("negative", vec![user(a)], vec![set("request_percentage", -1.0)], false),
        ("fractional long", vec![user(a)], vec![set("producer_byte_rate", 1.5)], false),
        ("too large long", vec![user(a)], vec![set("producer_byte_rate", 1e19)], false),
        ("too large int", vec![ip("127.0.0.9")], vec![set("connection_creation_rate", 3e9)], false),
        ("duplicate key", vec![user(a)], vec![set("producer_byte_rate", 1.0), set("producer_byte_rate", 2.0)], false),
        ("type twice", vec![user("x"), user(a)], vec![set("consumer_byte_rate", 3072.0)], false),
        ("remove missing", vec![user(a)], vec![("request_percentage", None)], false),
        ("validate only", vec![client(c1)], vec![set("producer_byte_rate", 7.0)], true),
        ("validate only, refused", vec![client(c1)], vec![set("producer_byte_rate", 0.5)], true),
    ];
    for (what, entity, ops, validate_only) in requests {
        let answer = alter(c, vec![entry(&entity, &ops)], validate_only).await;
        out.push(format!("alter {what}: {answer}"));
    }
    let two = vec![
        entry(
            &[("client-id", None), user(a)],
            &[set("consumer_byte_rate", 8192.0)],
        ),
        entry(&[user(a)], &[set("consumer_byte_rate", -5.0)]),
    ];
    out.push(format!(
        "alter one good, one bad: {}",
        alter(c, two, false).await
    ));
    // Kafka applies its changes to the broker's image asynchronously.
    tokio::time::sleep(Duration::from_secs(1)).await;
    #[rustfmt::skip]
    let filters: Vec<(&str, Vec<Component>, bool)> = vec![
        ("all", vec![], false),
        ("none (strict, no components)", vec![], true),
        ("any user", vec![("user", 2, None)], false),
        ("any user, strict", vec![("user", 2, None)], true),
        ("default client", vec![("client-id", 1, None)], false),
        ("alice", vec![("user", 0, Some(a))], false),
        ("alice, strict", vec![("user", 0, Some(a))], true),
        (
            "alice and any client",
            vec![("user", 0, Some(a)), ("client-id", 2, None)],
            false,
        ),
        ("client c1", vec![("client-id", 0, Some(c1))], false),
        ("any ip", vec![("ip", 2, None)], false),
        ("empty type", vec![("", 2, None)], false),
        (
            "type twice",
            vec![("user", 2, None), ("user", 1, None)],
            false,
        ),
        ("unsupported type", vec![("topic", 2, None)], false),
        ("exact without a string", vec![("user", 0, None)], false),
        ("default with a string", vec![("user", 1, Some(a))], false),
        ("any with a string", vec![("user", 2, Some(a))], false),
        ("unknown match", vec![("user", 5, None)], false),
        (
            "ip with user",
            vec![("ip", 2, None), ("user", 2, None)],
            false,
        ),
    ];
    for (what, components, strict) in filters {
        out.push(format!(
            "describe {what}: {}",
            describe(c, run, &components, strict).await
        ));
    }
    // Everything of this run removed again.
    let cleanup = vec![
        entry(
            &[user(a)],
            &[("producer_byte_rate", None), ("consumer_byte_rate", None)],
        ),
        entry(
            &[user(a), ("client-id", Some(c1))],
            &[("producer_byte_rate", None), ("request_percentage", None)],
        ),
        entry(
            &[user(a), ("client-id", None)],
            &[
                ("controller_mutation_rate", None),
                ("consumer_byte_rate", None),
            ],
        ),
        entry(
            &[("ip", Some("127.0.0.9"))],
            &[("connection_creation_rate", None)],
        ),
    ];
    out.push(format!(
        "alter remove all: {}",
        alter(c, cleanup, false).await
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    out.push(format!(
        "describe alice after removal: {}",
        describe(c, run, &[("user", 0, Some(a))], false).await
    ));
    out
}

/// A record batch of one record with a `bytes`-byte value (not
/// compressible, not that it matters: no compression).
fn big_batch(bytes: usize, seed: u64) -> Bytes {
    let mut x = seed | 1;
    let value: Vec<u8> = (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    common::record_batch(Bytes::from(value))
}

const PRODUCE_QUOTA: f64 = 100_000.0;
const FETCH_QUOTA: f64 = 40_000.0;
/// Two batches of this: a request ~1.15 MB, 1.5 s of throttle at
/// `PRODUCE_QUOTA`; one batch a fetch ~4.4 s over `FETCH_QUOTA`.
const BATCH_BYTES: usize = 575_000;

/// What one broker did to a throttled client.
#[derive(Debug)]
struct Throttled {
    produce_ms: i32,
    /// How long an ApiVersions sent right after the produce waited.
    muted_ms: u128,
    fetch_ms: i32,
    fetch_topics: usize,
    /// A client within its quota: the fetch's throttle and records.
    within_ms: i32,
    within_records: usize,
}

async fn wait_for_leaders(c: &Connection, topic: &str) {
    for _ in 0..100 {
        let req =
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s(topic))))]));
        let r = c.call_version(&req, 12).await.unwrap();
        if r.topics.iter().all(|t| {
            t.error_code == 0
                && t.partitions
                    .iter()
                    .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{topic} has no leaders");
}

async fn set_client_quota(root: &Connection, client_id: &str, key: &str, value: f64, run: &str) {
    let r = alter(
        root,
        vec![entry(
            &[("client-id", Some(client_id))],
            &[(key, Some(value))],
        )],
        false,
    )
    .await;
    assert!(r.contains("] 0 -"), "{r}");
    for _ in 0..100 {
        if describe(root, run, &[("client-id", 0, Some(client_id))], false)
            .await
            .contains(key)
        {
            // The broker's quota manager learns of it with its image.
            tokio::time::sleep(Duration::from_secs(1)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("quota of {client_id} not visible");
}

fn fetch_request(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(50 << 20)])])
}

async fn throttling(bootstrap: &str, run: &str) -> Throttled {
    let root = admin(bootstrap).await;
    let topic = format!("quota-{run}");
    let req = common::create_topics_request(&[(&topic, 2)]);
    let r = root.call_version(&req, 7).await.unwrap();
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    wait_for_leaders(&root, &topic).await;
    let (slow, fast) = (format!("slow-{run}"), format!("fast-{run}"));
    set_client_quota(&root, &slow, "producer_byte_rate", PRODUCE_QUOTA, run).await;
    set_client_quota(&root, &slow, "consumer_byte_rate", FETCH_QUOTA, run).await;
    set_client_quota(&root, &fast, "consumer_byte_rate", 10e6, run).await;

    let c = connect(
        bootstrap,
        &Security::Plaintext,
        &slow,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let produce = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(s(&topic)))
            .with_partition_data(
                (0..2)
                    .map(|p| {
                        produce_request::PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(big_batch(BATCH_BYTES, p as u64 + 7)))
                    })
                    .collect(),
            )]);
    let r = c.call_version(&produce, 9).await.unwrap();
    for p in &r.responses[0].partition_responses {
        assert_eq!(p.error_code, 0, "{r:?}");
    }
    let produce_ms = r.throttle_time_ms;
    let t = Instant::now();
    c.call_version(&ApiVersionsRequest::default(), 3)
        .await
        .unwrap();
    let muted_ms = t.elapsed().as_millis();
    let r = c.call_version(&fetch_request(&topic), 12).await.unwrap();
    let (fetch_ms, fetch_topics) = (r.throttle_time_ms, r.responses.len());

    let c = connect(
        bootstrap,
        &Security::Plaintext,
        &fast,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let r = c.call_version(&fetch_request(&topic), 12).await.unwrap();
    let within_records = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    Throttled {
        produce_ms,
        muted_ms,
        fetch_ms,
        fetch_topics,
        within_ms: r.throttle_time_ms,
        within_records,
    }
}

/// One answer as a line: what was asked, each result's code and message
/// ("-" for none); and the throttle time.
fn outcome<'a>(
    what: &str,
    results: impl Iterator<Item = (i16, &'a Option<StrBytes>)>,
    throttle_ms: i32,
) -> (String, i32) {
    let codes: Vec<String> = results
        .map(|(c, m)| format!("{c} {}", m.as_ref().map_or("-", |m| m.as_str())))
        .collect();
    (format!("{what}: {}", codes.join(", ")), throttle_ms)
}

/// What one broker answered a client over its controller mutation quota:
/// per request, the per-topic codes (and messages) and the throttle.
async fn mutations(bootstrap: &str, run: &str) -> Vec<(String, i32)> {
    let root = admin(bootstrap).await;
    let client = format!("mutator-{run}");
    // 1 partition per second: 10 of credit.
    set_client_quota(&root, &client, "controller_mutation_rate", 1.0, run).await;
    let name = |n: &str| format!("mq-{n}-{run}");
    let create = |topics: &[(&str, i32)]| {
        let named: Vec<(String, i32)> = topics.iter().map(|(n, p)| (name(n), *p)).collect();
        let named: Vec<(&str, i32)> = named.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        common::create_topics_request(&named)
    };
    // A new connection for each request: each throttled one is muted.
    let conn = || {
        connect(
            bootstrap,
            &Security::Plaintext,
            &client,
            Duration::from_secs(30),
        )
    };
    let mut out = Vec::new();
    // Strict (v7): 8 and 8 taken (the second while credit remains), the
    // third refused.
    let r = conn()
        .await
        .unwrap()
        .call_version(&create(&[("a", 8), ("b", 8), ("c", 1)]), 7)
        .await
        .unwrap();
    let codes = r.topics.iter().map(|t| (t.error_code, &t.error_message));
    out.push(outcome("create v7", codes, r.throttle_time_ms));
    // Deleting is a mutation too: refused while owed.
    let del = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(vec![TopicName(s(&name("a")))]);
    let r = conn().await.unwrap().call_version(&del, 5).await.unwrap();
    let codes = r.responses.iter().map(|t| (t.error_code, &t.error_message));
    out.push(outcome("delete v5", codes, r.throttle_time_ms));
    let grow = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(TopicName(s(&name("b"))))
                .with_count(9)
                .with_assignments(None),
        ]);
    let r = conn().await.unwrap().call_version(&grow, 3).await.unwrap();
    let codes = r.results.iter().map(|t| (t.error_code, &t.error_message));
    out.push(outcome("create partitions v3", codes, r.throttle_time_ms));
    // Permissive (v5): taken, and throttled for all that is owed.
    let r = conn()
        .await
        .unwrap()
        .call_version(&create(&[("d", 2)]), 5)
        .await
        .unwrap();
    let codes = r.topics.iter().map(|t| (t.error_code, &t.error_message));
    out.push(outcome("create v5", codes, r.throttle_time_ms));
    out
}

/// `a` and `b` within 3 % (and 60 ms) of each other.
fn close(a: i32, b: i32) -> bool {
    let d = (a - b).abs() as f64;
    d <= 60.0 || d <= 0.03 * a.max(b) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_are_managed_and_enforced_as_apache_kafka_does() {
    let run = format!("{:x}", std::process::id());
    let kafka = tokio::task::spawn_blocking(common::Kafka::start)
        .await
        .unwrap();
    let root = admin(&kafka.bootstrap).await;
    let k_admin = admin_lines(&root, &run).await;
    let k = throttling(&kafka.bootstrap, &run).await;
    let k_mutations = mutations(&kafka.bootstrap, &run).await;
    drop(kafka);

    let agent = tokio::task::spawn_blocking(|| common::Agent::start(&[]))
        .await
        .unwrap();
    let root = admin(&agent.bootstrap).await;
    let r_admin = admin_lines(&root, &run).await;
    let r = throttling(&agent.bootstrap, &run).await;
    let r_mutations = mutations(&agent.bootstrap, &run).await;
    tokio::task::spawn_blocking(move || drop(agent))
        .await
        .unwrap();

    let mut diff = String::new();
    for (a, b) in k_admin.iter().zip(&r_admin) {
        if a != b {
            diff.push_str(&format!("  kafka:  {a}\n  rutomq: {b}\n"));
        }
    }
    eprintln!("--- Apache Kafka\n{}", k_admin.join("\n"));
    assert!(
        diff.is_empty() && k_admin.len() == r_admin.len(),
        "rutomq answers differently from Apache Kafka:\n{diff}"
    );

    eprintln!("throttling: kafka {k:?}\n            rutomq {r:?}");
    // The expected figure: 1.15 MB over 10 s at 100 000 B/s is 15 % over,
    // 1.5 s of throttle.
    for t in [&k, &r] {
        assert!((1_200..2_000).contains(&t.produce_ms), "{t:?}");
        assert!(
            t.muted_ms + 150 >= t.produce_ms as u128,
            "the connection was not muted: {t:?}"
        );
        assert!(t.fetch_ms > 3_000, "{t:?}");
        assert_eq!(
            t.fetch_topics, 0,
            "a throttled fetch is answered empty: {t:?}"
        );
        assert_eq!(t.within_ms, 0, "{t:?}");
        assert!(t.within_records > 0, "{t:?}");
    }
    assert!(
        close(k.produce_ms, r.produce_ms),
        "produce throttle: kafka {k:?}, rutomq {r:?}"
    );
    assert!(
        close(k.fetch_ms, r.fetch_ms),
        "fetch throttle: kafka {k:?}, rutomq {r:?}"
    );

    eprintln!("mutations: kafka {k_mutations:?}\n           rutomq {r_mutations:?}");
    assert_eq!(k_mutations.len(), r_mutations.len());
    for ((k_codes, k_ms), (r_codes, r_ms)) in k_mutations.iter().zip(&r_mutations) {
        assert_eq!(k_codes, r_codes);
        // Owed permits over the rate, as each measured them a moment apart.
        assert!(
            (k_ms - r_ms).abs() <= 400,
            "{k_codes}: kafka {k_ms} ms, rutomq {r_ms} ms"
        );
    }
    assert!(k_mutations[0].0.ends_with("89 -"), "{k_mutations:?}");
}
