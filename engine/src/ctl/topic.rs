//! `rutomq topic create|list|describe|delete|alter-config`.

use std::collections::{BTreeMap, HashMap};

use anyhow::{anyhow, bail, Result};
use clap::Subcommand;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};

use datum_mq::native::Cluster;

use super::{check, error_name, key_value, Client, Report, Table};

const CREATE_TOPICS: (i16, i16) = (2, 7);
const DELETE_TOPICS: (i16, i16) = (1, 5);
const DESCRIBE_CONFIGS: (i16, i16) = (1, 4);
const ALTER_CONFIGS: (i16, i16) = (0, 1);
const LIST_OFFSETS: (i16, i16) = (1, 7);
/// Kafka's ConfigResource type of a topic.
const TOPIC_RESOURCE: i8 = 2;
/// DescribeConfigs' source of a value nobody set.
const DEFAULT_CONFIG: i8 = 5;

#[derive(Subcommand, Debug)]
pub enum TopicCmd {
    /// Create topics.
    Create {
        /// Topic names.
        #[arg(required = true)]
        names: Vec<String>,
        /// Partitions of each (default: the cluster's num.partitions).
        #[arg(short, long, default_value_t = -1)]
        partitions: i32,
        /// Replication factor: accepted as Kafka does; objects in the
        /// object store are the replicas.
        #[arg(short, long, default_value_t = -1)]
        replicas: i16,
        /// A topic config, NAME=VALUE (repeatable): -c cleanup.policy=compact.
        #[arg(short = 'c', long = "config")]
        configs: Vec<String>,
        /// Check the request without creating anything.
        #[arg(long)]
        dry_run: bool,
    },
    /// List topics.
    List {
        /// Also list internal topics (__consumer_offsets...).
        #[arg(long)]
        internal: bool,
    },
    /// A topic's partitions, offsets and configs.
    Describe {
        /// The topic.
        name: String,
        /// Show every config, not only those set on the topic.
        #[arg(long)]
        all_configs: bool,
    },
    /// Delete topics.
    Delete {
        /// Topic names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Set or remove topic configs.
    AlterConfig {
        /// The topic.
        name: String,
        /// NAME=VALUE to set (repeatable).
        #[arg(long = "set")]
        set: Vec<String>,
        /// NAME to return to its default (repeatable).
        #[arg(long = "delete")]
        delete: Vec<String>,
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run(c: &Client, cmd: TopicCmd) -> Result<()> {
    let report = match cmd {
        TopicCmd::Create {
            names,
            partitions,
            replicas,
            configs,
            dry_run,
        } => create(c, names, partitions, replicas, &configs, dry_run).await?,
        TopicCmd::List { internal } => list(c, internal).await?,
        TopicCmd::Describe { name, all_configs } => describe(c, &name, all_configs).await?,
        TopicCmd::Delete { names } => delete(c, names).await?,
        TopicCmd::AlterConfig {
            name,
            set,
            delete,
            dry_run,
        } => alter_config(c, &name, &set, &delete, dry_run).await?,
    };
    report.print(c.format());
    Ok(())
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A per-item outcome column: "OK" or Kafka's error name and message.
pub(super) fn outcome(code: i16, message: Option<&StrBytes>) -> Value {
    if code == 0 {
        return json!("OK");
    }
    match message.map(|m| m.as_str()).filter(|m| !m.is_empty()) {
        Some(m) => json!(format!("{}: {m}", error_name(code))),
        None => json!(error_name(code)),
    }
}

async fn create(
    c: &Client,
    names: Vec<String>,
    partitions: i32,
    replicas: i16,
    configs: &[String],
    dry_run: bool,
) -> Result<Report> {
    let configs = configs
        .iter()
        .map(|kv| key_value(kv, "--config"))
        .collect::<Result<Vec<_>>>()?;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(dry_run)
        .with_topics(
            names
                .iter()
                .map(|n| {
                    CreatableTopic::default()
                        .with_name(name(n))
                        .with_num_partitions(partitions)
                        .with_replication_factor(replicas)
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(s(k))
                                        .with_value(Some(s(v)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let resp = c.conn().call(&req, CREATE_TOPICS).await?;
    let mut t = Table::new(&["TOPIC", "ID", "PARTITIONS", "STATUS"]);
    let mut failed = 0;
    for r in &resp.topics {
        failed += usize::from(r.error_code != 0);
        let id = (!r.topic_id.is_nil()).then(|| json!(r.topic_id.to_string()));
        let parts = (r.num_partitions > 0).then(|| json!(r.num_partitions));
        t.row(vec![
            json!(r.name.as_str()),
            id.unwrap_or(Value::Null),
            parts.unwrap_or(Value::Null),
            outcome(r.error_code, r.error_message.as_ref()),
        ]);
    }
    print_then_fail(c, Report::table(t), failed, "creating topics")
}

/// A per-item report; when an item failed, it is printed here and the
/// command fails, so scripts see a non-zero exit.
pub(super) fn print_then_fail(
    c: &Client,
    report: Report,
    failed: usize,
    what: &str,
) -> Result<Report> {
    if failed == 0 {
        return Ok(report);
    }
    report.print(c.format());
    Err(anyhow!("{what}: {failed} failed"))
}

async fn list(c: &Client, internal: bool) -> Result<Report> {
    let md = c.metadata(None).await?;
    let mut topics: Vec<_> = md
        .topics
        .iter()
        .filter(|t| internal || !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| (n.as_str(), t)))
        .collect();
    topics.sort_by(|a, b| a.0.cmp(b.0));
    let mut t = Table::new(&["TOPIC", "PARTITIONS", "ID", "INTERNAL"]);
    for (n, topic) in topics {
        t.row(vec![
            json!(n),
            json!(topic.partitions.len()),
            json!(topic.topic_id.to_string()),
            json!(topic.is_internal),
        ]);
    }
    Ok(Report::table(t))
}

/// The offset at `timestamp` (-2 earliest, -1 latest) of each partition,
/// asked of the partition's leader as Kafka clients do.
pub(super) async fn list_offsets(
    c: &Client,
    cluster: &Cluster,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> Result<HashMap<(String, i32), i64>> {
    let mut by_leader: BTreeMap<String, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
    for (topic, p) in partitions {
        let addr = cluster
            .leader_addr(topic, *p)
            .unwrap_or(c.conn().broker())
            .to_owned();
        by_leader
            .entry(addr)
            .or_default()
            .entry(topic)
            .or_default()
            .push(*p);
    }
    let mut out = HashMap::new();
    for (addr, topics) in by_leader {
        let req = datum_mq::native::list_offsets_request(
            topics.iter().map(|(t, ps)| (*t, ps.as_slice())),
            timestamp,
        );
        let resp = c.to(&addr).await?.call(&req, LIST_OFFSETS).await?;
        for t in resp.topics {
            for p in t.partitions {
                check(p.error_code, None, || {
                    format!("offsets of {}-{}", t.name.as_str(), p.partition_index)
                })?;
                out.insert((t.name.to_string(), p.partition_index), p.offset);
            }
        }
    }
    Ok(out)
}

/// The topic's metadata entry, or the error Kafka gave for it.
pub(super) fn find_topic<'a>(
    md: &'a MetadataResponse,
    topic: &str,
) -> Result<&'a kafka_protocol::messages::metadata_response::MetadataResponseTopic> {
    let t = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic))
        .ok_or_else(|| anyhow!("topic {topic}: not in the cluster's metadata"))?;
    check(t.error_code, None, || format!("topic {topic}"))?;
    Ok(t)
}

async fn describe(c: &Client, topic: &str, all_configs: bool) -> Result<Report> {
    let md = c.metadata(Some(&[topic.to_owned()])).await?;
    let t = find_topic(&md, topic)?;
    let mut report = Report::default();
    report.fact("name", topic);
    report.fact("id", t.topic_id.to_string());
    report.fact("partitions", t.partitions.len());
    report.fact("internal", t.is_internal);

    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(s(topic))
            .with_configuration_keys(None)]);
    let resp = c.conn().call(&req, DESCRIBE_CONFIGS).await?;
    let mut configs = Table::new(&["CONFIG", "VALUE", "SOURCE"]);
    for r in &resp.results {
        check(r.error_code, r.error_message.as_deref(), || {
            format!("configs of {topic}")
        })?;
        let mut entries: Vec<_> = r
            .configs
            .iter()
            .filter(|e| all_configs || e.config_source != DEFAULT_CONFIG)
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            let value = match (&e.value, e.is_sensitive) {
                (_, true) => json!("(sensitive)"),
                (Some(v), false) => json!(v.as_str()),
                (None, false) => Value::Null,
            };
            configs.row(vec![
                json!(e.name.as_str()),
                value,
                json!(source_name(e.config_source)),
            ]);
        }
    }
    report.section("configs", configs);

    let parts: Vec<(String, i32)> = t
        .partitions
        .iter()
        .map(|p| (topic.to_owned(), p.partition_index))
        .collect();
    let cluster = super::cluster_of(&md);
    let starts = list_offsets(c, &cluster, &parts, -2).await?;
    let ends = list_offsets(c, &cluster, &parts, -1).await?;
    let mut table = Table::new(&[
        "PARTITION",
        "LEADER",
        "LOG START",
        "HIGH WATERMARK",
        "RECORDS",
    ]);
    let mut sorted: Vec<_> = t.partitions.iter().collect();
    sorted.sort_by_key(|p| p.partition_index);
    for p in sorted {
        let key = (topic.to_owned(), p.partition_index);
        let (start, end) = (starts.get(&key).copied(), ends.get(&key).copied());
        let records = match (start, end) {
            (Some(s), Some(e)) => json!(e - s),
            _ => Value::Null,
        };
        table.row(vec![
            json!(p.partition_index),
            json!(p.leader_id.0),
            json!(start),
            json!(end),
            records,
        ]);
    }
    report.section("partitions", table);
    Ok(report)
}

/// DescribeConfigs' config_source as Kafka's tools name it.
fn source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

async fn delete(c: &Client, names: Vec<String>) -> Result<Report> {
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(names.iter().map(|n| name(n)).collect());
    let resp = c.conn().call(&req, DELETE_TOPICS).await?;
    let mut t = Table::new(&["TOPIC", "STATUS"]);
    let mut failed = 0;
    for r in &resp.responses {
        failed += usize::from(r.error_code != 0);
        t.row(vec![
            json!(r.name.as_ref().map(|n| n.as_str())),
            outcome(r.error_code, r.error_message.as_ref()),
        ]);
    }
    print_then_fail(c, Report::table(t), failed, "deleting topics")
}

async fn alter_config(
    c: &Client,
    topic: &str,
    set: &[String],
    delete: &[String],
    dry_run: bool,
) -> Result<Report> {
    if set.is_empty() && delete.is_empty() {
        bail!("nothing to change: give --set NAME=VALUE or --delete NAME");
    }
    let mut ops = Vec::new();
    for kv in set {
        let (k, v) = key_value(kv, "--set")?;
        ops.push(
            AlterableConfig::default()
                .with_name(s(&k))
                .with_config_operation(0)
                .with_value(Some(s(&v))),
        );
    }
    for k in delete {
        ops.push(
            AlterableConfig::default()
                .with_name(s(k))
                .with_config_operation(1),
        );
    }
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(dry_run)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(s(topic))
            .with_configs(ops)]);
    let resp = c.conn().call(&req, ALTER_CONFIGS).await?;
    let mut t = Table::new(&["TOPIC", "STATUS"]);
    let mut failed = 0;
    for r in &resp.responses {
        failed += usize::from(r.error_code != 0);
        t.row(vec![
            json!(r.resource_name.as_str()),
            outcome(r.error_code, r.error_message.as_ref()),
        ]);
    }
    print_then_fail(c, Report::table(t), failed, "changing configs")
}
