//! `rutomq group list|describe|reset-offsets`.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Result};
use clap::{ArgGroup, Subcommand};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};

use super::topic::{find_topic, list_offsets, outcome, print_then_fail};
use super::{check, Client, Report, Table};

const LIST_GROUPS: (i16, i16) = (0, 5);
const DESCRIBE_GROUPS: (i16, i16) = (0, 5);
const OFFSET_FETCH: (i16, i16) = (1, 7);
const OFFSET_COMMIT: (i16, i16) = (2, 8);

#[derive(Subcommand, Debug)]
pub enum GroupCmd {
    /// List the groups of every agent.
    List,
    /// A group's state, members and, per partition, its committed offset
    /// and lag.
    Describe {
        /// The consumer group.
        group: String,
    },
    /// Move a group's committed offsets (the group must have no members).
    /// Prints the plan; --execute commits it.
    #[command(group(ArgGroup::new("to").required(true)
        .args(["to_earliest", "to_latest", "to_offset", "shift_by"])))]
    ResetOffsets {
        /// The consumer group.
        group: String,
        /// The topic whose offsets move.
        #[arg(long)]
        topic: String,
        /// Only these partitions (default: all), comma-separated.
        #[arg(long, value_delimiter = ',')]
        partitions: Vec<i32>,
        /// To each partition's log start.
        #[arg(long)]
        to_earliest: bool,
        /// To each partition's end (the group skips what is there now).
        #[arg(long)]
        to_latest: bool,
        /// To this offset in every partition, kept within the log.
        #[arg(long)]
        to_offset: Option<i64>,
        /// Move each committed offset by N (negative: back), kept within
        /// the partition's log.
        #[arg(long, allow_hyphen_values = true)]
        shift_by: Option<i64>,
        /// Commit the new offsets (without it, only the plan is shown).
        #[arg(long)]
        execute: bool,
    },
}

pub async fn run(c: &Client, cmd: GroupCmd) -> Result<()> {
    let report = match cmd {
        GroupCmd::List => Report::table(list(c).await?),
        GroupCmd::Describe { group } => describe(c, &group).await?,
        GroupCmd::ResetOffsets {
            group,
            topic,
            partitions,
            to_earliest,
            to_latest,
            to_offset,
            shift_by,
            execute,
        } => {
            let to = match (to_earliest, to_latest, to_offset, shift_by) {
                (true, ..) => Target::Earliest,
                (_, true, ..) => Target::Latest,
                (_, _, Some(o), _) => Target::Offset(o),
                (.., Some(n)) => Target::Shift(n),
                _ => bail!("give one of --to-earliest, --to-latest, --to-offset, --shift-by"),
            };
            reset(c, &group, &topic, &partitions, to, execute).await?
        }
    };
    report.print(c.format());
    Ok(())
}

/// Every agent's groups (ListGroups answers for the groups an agent
/// coordinates, so each is asked), by name.
pub(super) async fn list(c: &Client) -> Result<Table> {
    let md = c.metadata(Some(&[])).await?;
    let mut groups = BTreeMap::new();
    let mut unreachable = Vec::new();
    for b in &md.brokers {
        let addr = datum_mq::native::host_port(&b.host, b.port);
        let asked = async {
            let resp = c
                .to(&addr)
                .await?
                .call(&ListGroupsRequest::default(), LIST_GROUPS)
                .await?;
            check(resp.error_code, None, || {
                format!("listing the groups of agent {}", b.node_id.0)
            })?;
            anyhow::Ok(resp)
        };
        // One agent down must not hide the others' groups (a sick cluster
        // is when this is asked).
        let resp = match asked.await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(agent = b.node_id.0, error = %format!("{e:#}"), "cannot list this agent's groups");
                unreachable.push(b.node_id.0);
                continue;
            }
        };
        for g in resp.groups {
            let kind = if g.group_type.is_empty() {
                g.protocol_type.to_string()
            } else {
                g.group_type.to_string()
            };
            groups.insert(
                g.group_id.to_string(),
                (kind, g.group_state.to_string(), b.node_id.0),
            );
        }
    }
    let mut t = Table::new(&["GROUP", "TYPE", "STATE", "COORDINATOR"]);
    for node in unreachable {
        t.row(vec![
            Value::Null,
            Value::Null,
            json!("(agent unreachable)"),
            json!(node),
        ]);
    }
    for (g, (kind, state, node)) in groups {
        let state = (!state.is_empty()).then(|| json!(state));
        t.row(vec![
            json!(g),
            json!(kind),
            state.unwrap_or(Value::Null),
            json!(node),
        ]);
    }
    Ok(t)
}

/// A group's committed offset per partition (all the topics it has
/// committed for, or `topic` only).
async fn committed(
    c: &Client,
    group: &str,
    topic: Option<&str>,
) -> Result<BTreeMap<(String, i32), i64>> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let coordinator = c.coordinator(group).await?;
    let md;
    let topics = match topic {
        None => None,
        Some(t) => {
            md = c.metadata(Some(&[t.to_owned()])).await?;
            let parts = find_topic(&md, t)?
                .partitions
                .iter()
                .map(|p| p.partition_index)
                .collect();
            Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                .with_partition_indexes(parts)])
        }
    };
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(topics);
    let resp = coordinator.call(&req, OFFSET_FETCH).await?;
    check(resp.error_code, None, || {
        format!("offsets of group {group}")
    })?;
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            check(p.error_code, None, || {
                format!(
                    "offset of {group} on {}-{}",
                    t.name.as_str(),
                    p.partition_index
                )
            })?;
            if p.committed_offset >= 0 {
                out.insert((t.name.to_string(), p.partition_index), p.committed_offset);
            }
        }
    }
    Ok(out)
}

/// Per partition the group has committed for: (committed, end, lag).
pub(super) async fn lag(c: &Client, group: &str) -> Result<Vec<((String, i32), i64, i64)>> {
    let committed = committed(c, group, None).await?;
    if committed.is_empty() {
        return Ok(Vec::new());
    }
    let mut topics: Vec<String> = committed.keys().map(|(t, _)| t.clone()).collect();
    topics.dedup();
    let md = c.metadata(Some(&topics)).await?;
    let parts: Vec<(String, i32)> = committed.keys().cloned().collect();
    let ends = list_offsets(c, &super::cluster_of(&md), &parts, -1).await?;
    Ok(committed
        .into_iter()
        .filter_map(|(k, off)| ends.get(&k).map(|&end| (k, off, end)))
        .collect())
}

async fn describe_group(
    c: &Client,
    group: &str,
) -> Result<kafka_protocol::messages::describe_groups_response::DescribedGroup> {
    let coordinator = c.coordinator(group).await?;
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))]);
    let resp = coordinator.call(&req, DESCRIBE_GROUPS).await?;
    let g = resp
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("group {group}: no answer"))?;
    check(g.error_code, g.error_message.as_deref(), || {
        format!("group {group}")
    })?;
    Ok(g)
}

async fn describe(c: &Client, group: &str) -> Result<Report> {
    let g = describe_group(c, group).await?;
    let mut report = Report::default();
    report.fact("group", group);
    report.fact("state", g.group_state.as_str());
    report.fact("protocol_type", g.protocol_type.as_str());
    report.fact("assignor", g.protocol_data.as_str());
    let mut members = Table::new(&["MEMBER", "INSTANCE", "CLIENT ID", "HOST"]);
    for m in &g.members {
        members.row(vec![
            json!(m.member_id.as_str()),
            json!(m.group_instance_id.as_ref().map(|s| s.as_str())),
            json!(m.client_id.as_str()),
            json!(m.client_host.as_str()),
        ]);
    }
    report.section("members", members);
    let mut offsets = Table::new(&["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"]);
    let mut total = 0;
    for ((topic, p), off, end) in lag(c, group).await? {
        let l = (end - off).max(0);
        total += l;
        offsets.row(vec![
            json!(topic),
            json!(p),
            json!(off),
            json!(end),
            json!(l),
        ]);
    }
    report.fact("total_lag", total);
    report.section("offsets", offsets);
    Ok(report)
}

#[derive(Clone, Copy, Debug)]
enum Target {
    Earliest,
    Latest,
    Offset(i64),
    Shift(i64),
}

async fn reset(
    c: &Client,
    group: &str,
    topic: &str,
    only: &[i32],
    to: Target,
    execute: bool,
) -> Result<Report> {
    // Kafka's tool refuses too: a live member would commit over the new
    // offsets (or be fenced by them) at its next commit.
    let g = describe_group(c, group).await?;
    if !g.members.is_empty() {
        bail!(
            "group {group} has {} member(s) (state {}): stop its consumers before moving its offsets",
            g.members.len(),
            g.group_state.as_str()
        );
    }
    let md = c.metadata(Some(&[topic.to_owned()])).await?;
    let t = find_topic(&md, topic)?;
    let mut parts: Vec<(String, i32)> = t
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .filter(|p| only.is_empty() || only.contains(p))
        .map(|p| (topic.to_owned(), p))
        .collect();
    parts.sort();
    if let Some(p) = only.iter().find(|p| !parts.iter().any(|(_, q)| q == *p)) {
        bail!("{topic} has no partition {p}");
    }
    let cluster = super::cluster_of(&md);
    let starts = list_offsets(c, &cluster, &parts, -2).await?;
    let ends = list_offsets(c, &cluster, &parts, -1).await?;
    let current = committed(c, group, Some(topic)).await?;
    let mut plan = Vec::new();
    for k in &parts {
        let (Some(&start), Some(&end)) = (starts.get(k), ends.get(k)) else {
            bail!("no offsets for {}-{}", k.0, k.1);
        };
        let end = end.max(start);
        let now = current.get(k).copied();
        let new = match to {
            Target::Earliest => start,
            Target::Latest => end,
            Target::Offset(o) => o,
            Target::Shift(n) => now.unwrap_or(start).saturating_add(n),
        }
        .clamp(start, end);
        plan.push((k.1, now, new));
    }
    let mut table = Table::new(&["TOPIC", "PARTITION", "CURRENT", "NEW", "STATUS"]);
    if !execute {
        for (p, now, new) in &plan {
            table.row(vec![
                json!(topic),
                json!(p),
                json!(now),
                json!(new),
                json!("planned (--execute applies)"),
            ]);
        }
        return Ok(Report::table(table));
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(
                plan.iter()
                    .map(|(p, _, new)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(*new)
                            .with_committed_leader_epoch(-1)
                    })
                    .collect(),
            )]);
    let resp = c
        .coordinator(group)
        .await?
        .call(&req, OFFSET_COMMIT)
        .await?;
    let mut failed = 0;
    for t in &resp.topics {
        for r in &t.partitions {
            failed += usize::from(r.error_code != 0);
            let (now, new) = plan
                .iter()
                .find(|(p, ..)| *p == r.partition_index)
                .map(|(_, now, new)| (json!(now), json!(new)))
                .unwrap_or((Value::Null, Value::Null));
            table.row(vec![
                json!(t.name.as_str()),
                json!(r.partition_index),
                now,
                new,
                outcome(r.error_code, None),
            ]);
        }
    }
    print_then_fail(c, Report::table(table), failed, "committing offsets")
}
