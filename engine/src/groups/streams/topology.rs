//! A streams group's topology as its members sent it, and what the
//! coordinator makes of it against the topics that exist (Kafka's
//! "configured topology"): the partitions of repartition and changelog
//! topics, the tasks of each subtopology, the internal topics to create,
//! or why the group cannot run yet.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::super::consumer::TopicsView;
use crate::error::ErrorCode;

/// A repartition or changelog topic as the topology describes it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopicInfo {
    pub name: String,
    /// 0: decided by the coordinator.
    pub partitions: i32,
    /// -1 or 0: the cluster's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Topics that must be partitioned alike: indexes into the subtopology's
/// source topics and repartition source topics.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Subtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub repartition_sink_topics: Vec<String>,
    pub state_changelog_topics: Vec<TopicInfo>,
    pub repartition_source_topics: Vec<TopicInfo>,
    pub copartition_groups: Vec<CopartitionGroup>,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Topology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

/// The heartbeat's status codes (StreamsGroupHeartbeatResponse.Status).
pub mod status {
    pub const STALE_TOPOLOGY: i8 = 0;
    pub const MISSING_SOURCE_TOPICS: i8 = 1;
    pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
    pub const MISSING_INTERNAL_TOPICS: i8 = 3;
    pub const SHUTDOWN_APPLICATION: i8 = 4;
    pub const ASSIGNMENT_DELAYED: i8 = 5;
}

/// An internal topic the coordinator wants created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creatable {
    pub name: String,
    pub partitions: i32,
    /// -1: the cluster's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// The topology against the topics that exist.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Configured {
    /// Tasks per subtopology (a task per partition of its inputs).
    pub tasks: BTreeMap<String, i32>,
    /// The partitions decided for each repartition and changelog topic.
    pub partitions: BTreeMap<String, i32>,
    /// Why the group cannot run yet (a status code and its detail).
    pub problem: Option<(i8, String)>,
    /// Internal topics that do not exist yet.
    pub create: Vec<Creatable>,
    /// Subtopologies with state (changelog topics): those get standbys.
    pub stateful: BTreeSet<String>,
    /// The required topics' metadata it was computed from.
    pub seen: BTreeMap<String, (Uuid, i32)>,
}

impl Configured {
    pub fn is_ready(&self) -> bool {
        self.problem.is_none()
    }
}

/// A topology error that rejects the heartbeat (STREAMS_INVALID_TOPOLOGY).
pub type Invalid = (ErrorCode, String);

fn invalid(message: String) -> Invalid {
    (ErrorCode::StreamsInvalidTopology, message)
}

/// "a, b, c and 2 additional topics": at most three names.
fn some_names<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let all: Vec<&String> = names.into_iter().collect();
    let shown: Vec<&str> = all.iter().take(3).map(|s| s.as_str()).collect();
    let mut out = shown.join(", ");
    if all.len() > 3 {
        out.push_str(&format!(" and {} additional topics", all.len() - 3));
    }
    out
}

impl Topology {
    /// Every topic name it refers to.
    pub fn topic_names(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in &self.subtopologies {
            out.extend(s.source_topics.iter().cloned());
            out.extend(s.repartition_sink_topics.iter().cloned());
            out.extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
            out.extend(s.state_changelog_topics.iter().map(|t| t.name.clone()));
        }
        out
    }

    /// The topics a subtopology reads (its tasks' partitions).
    pub fn inputs(&self, id: &str) -> Vec<&str> {
        self.subtopologies
            .iter()
            .filter(|s| s.id == id)
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .map(String::as_str)
                    .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
            })
            .collect()
    }

    /// The subtopology reading `topic` (source or repartition source).
    pub fn subtopology_of(&self, topic: &str) -> Option<&str> {
        self.subtopologies
            .iter()
            .find(|s| {
                s.source_topics.iter().any(|t| t == topic)
                    || s.repartition_source_topics.iter().any(|t| t.name == topic)
            })
            .map(|s| s.id.as_str())
    }

    /// Decides partitions and tasks against `topics` (Kafka's
    /// InternalTopicManager): an `Err` rejects the topology; a problem in
    /// the result keeps the group waiting (missing or wrongly partitioned
    /// topics).
    pub fn configure(&self, topics: &TopicsView) -> Result<Configured, Invalid> {
        let seen: BTreeMap<String, (Uuid, i32)> = self
            .topic_names()
            .into_iter()
            .filter_map(|t| topics.get(&t).map(|v| (t, *v)))
            .collect();
        let mut out = Configured {
            seen,
            stateful: self
                .subtopologies
                .iter()
                .filter(|s| !s.state_changelog_topics.is_empty())
                .map(|s| s.id.clone())
                .collect(),
            ..Configured::default()
        };
        let external = |t: &str| topics.get(t).map(|v| v.1);
        let missing: BTreeSet<&String> = self
            .subtopologies
            .iter()
            .flat_map(|s| &s.source_topics)
            .filter(|t| external(t).is_none())
            .collect();
        if !missing.is_empty() {
            out.problem = Some((
                status::MISSING_SOURCE_TOPICS,
                format!("Source topics {} are missing.", some_names(missing)),
            ));
            return Ok(out);
        }
        let mut counts = self.repartition_counts(&external)?;
        if let Some(p) = self.copartition(&external, &mut counts) {
            out.problem = Some(p);
            return Ok(out);
        }
        for s in &self.subtopologies {
            if s.source_topics.is_empty() && s.repartition_source_topics.is_empty() {
                return Err(invalid(format!(
                    "No source topics found for subtopology {}",
                    s.id
                )));
            }
            let n = s
                .source_topics
                .iter()
                .filter_map(|t| external(t))
                .chain(
                    s.repartition_source_topics
                        .iter()
                        .filter_map(|t| counts.get(&t.name).copied()),
                )
                .max()
                .unwrap_or(0);
            out.tasks.insert(s.id.clone(), n);
        }
        // Internal topics: repartition topics, then changelogs (as many
        // partitions as their subtopology has tasks).
        let mut wanted: Vec<(&TopicInfo, i32)> = Vec::new();
        for s in &self.subtopologies {
            for t in &s.repartition_source_topics {
                wanted.push((t, counts.get(&t.name).copied().unwrap_or(0)));
            }
        }
        for s in &self.subtopologies {
            for t in &s.state_changelog_topics {
                wanted.push((t, out.tasks.get(&s.id).copied().unwrap_or(0)));
            }
        }
        out.partitions = wanted.iter().map(|(t, n)| (t.name.clone(), *n)).collect();
        let mut absent = Vec::new();
        for (t, n) in wanted {
            match external(&t.name) {
                Some(found) if found != n => {
                    out.problem = Some((
                        status::INCORRECTLY_PARTITIONED_TOPICS,
                        format!(
                            "Existing topic {} has different number of partitions: expected {n}, found {found}",
                            t.name
                        ),
                    ));
                    return Ok(out);
                }
                Some(_) => {}
                None => {
                    if !out.create.iter().any(|c| c.name == t.name) {
                        absent.push(t.name.clone());
                        out.create.push(Creatable {
                            name: t.name.clone(),
                            partitions: n,
                            replication_factor: if t.replication_factor == 0 {
                                -1
                            } else {
                                t.replication_factor
                            },
                            configs: t.configs.clone(),
                        });
                    }
                }
            }
        }
        if !absent.is_empty() {
            out.problem = Some((
                status::MISSING_INTERNAL_TOPICS,
                format!("Internal topics are missing: {}", some_names(&absent)),
            ));
        }
        Ok(out)
    }

    /// Partitions of every repartition topic: fixed ones as given; the
    /// others from the subtopologies writing them (the most partitions of
    /// the writer's inputs), until nothing more can be decided.
    fn repartition_counts(
        &self,
        external: &impl Fn(&str) -> Option<i32>,
    ) -> Result<BTreeMap<String, i32>, Invalid> {
        let mut counts: BTreeMap<String, i32> = BTreeMap::new();
        let mut undecided: BTreeSet<String> = BTreeSet::new();
        for s in &self.subtopologies {
            for t in &s.repartition_source_topics {
                if t.partitions > 0 {
                    counts.insert(t.name.clone(), t.partitions);
                } else {
                    undecided.insert(t.name.clone());
                }
            }
        }
        let written: BTreeSet<&String> = self
            .subtopologies
            .iter()
            .flat_map(|s| &s.repartition_sink_topics)
            .collect();
        if undecided.iter().any(|t| !written.contains(t)) {
            return Err(invalid(
                "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.".into(),
            ));
        }
        // Each pass decides every topic whose writers' inputs are known
        // by then: as many passes as the topology is deep.
        while !undecided.is_empty() {
            let mut decided: Vec<(String, i32)> = Vec::new();
            for s in &self.subtopologies {
                let sinks: Vec<&String> = s
                    .repartition_sink_topics
                    .iter()
                    .filter(|t| undecided.contains(*t))
                    .collect();
                if sinks.is_empty() {
                    continue;
                }
                let widest = s
                    .source_topics
                    .iter()
                    .filter_map(|t| external(t))
                    .chain(
                        s.repartition_source_topics
                            .iter()
                            .filter_map(|t| counts.get(&t.name).copied()),
                    )
                    .max();
                if let Some(n) = widest {
                    decided.extend(sinks.into_iter().map(|t| (t.clone(), n)));
                }
            }
            if decided.is_empty() {
                return Err(invalid(
                    "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.".into(),
                ));
            }
            for (t, n) in decided {
                undecided.remove(&t);
                let c = counts.entry(t).or_insert(n);
                *c = (*c).max(n);
            }
        }
        Ok(counts)
    }

    /// Copartition groups: the topics of each must have as many
    /// partitions; repartition topics follow the source topics. A problem
    /// when the topics that exist disagree.
    fn copartition(
        &self,
        external: &impl Fn(&str) -> Option<i32>,
        counts: &mut BTreeMap<String, i32>,
    ) -> Option<(i8, String)> {
        let wrong = |m: String| Some((status::INCORRECTLY_PARTITIONED_TOPICS, m));
        for s in &self.subtopologies {
            for g in &s.copartition_groups {
                let sources: Vec<&String> = g
                    .source_topics
                    .iter()
                    .filter_map(|&i| s.source_topics.get(i as usize))
                    .collect();
                let repartition: Vec<&TopicInfo> = g
                    .repartition_source_topics
                    .iter()
                    .filter_map(|&i| s.repartition_source_topics.get(i as usize))
                    .collect();
                let decided = if sources.is_empty() {
                    let fixed: BTreeSet<i32> = repartition
                        .iter()
                        .map(|t| t.partitions)
                        .filter(|&n| n > 0)
                        .collect();
                    if fixed.len() > 1 {
                        let list: Vec<String> = repartition
                            .iter()
                            .map(|t| format!("{}={}", t.name, t.partitions))
                            .collect();
                        return wrong(format!(
                            "Following topics do not have the same number of partitions: [{{{}}}]",
                            list.join(", ")
                        ));
                    }
                    match fixed.first() {
                        Some(&n) => n,
                        None => repartition
                            .iter()
                            .filter_map(|t| counts.get(&t.name).copied())
                            .max()
                            .unwrap_or(0),
                    }
                } else {
                    let found: BTreeMap<&String, i32> = sources
                        .iter()
                        .filter_map(|t| external(t).map(|n| (*t, n)))
                        .collect();
                    let distinct: BTreeSet<i32> = found.values().copied().collect();
                    if distinct.len() > 1 {
                        let list: Vec<String> =
                            found.iter().map(|(t, n)| format!("{t}={n}")).collect();
                        return wrong(format!(
                            "Following topics do not have the same number of partitions: [{{{}}}]",
                            list.join(", ")
                        ));
                    }
                    distinct.first().copied().unwrap_or(0)
                };
                for t in repartition {
                    if t.partitions > 0 && t.partitions != decided {
                        return wrong(format!(
                            "Number of partitions [{}] of repartition topic [{}] doesn't match number of partitions [{decided}] of the source topic.",
                            t.partitions, t.name
                        ));
                    }
                    counts.insert(t.name.clone(), decided);
                }
            }
        }
        None
    }
}

// ---- stored form -----------------------------------------------------------

use bytes::{Buf, BufMut, BytesMut};

use super::super::stored::{
    get_i16, get_i32, get_list, get_str, get_strs, put_list, put_str, put_strs,
};

/// A stored pair of strings (a topic's config, a client's tag).
pub(super) fn put_pair(b: &mut BytesMut, (k, v): &(String, String)) {
    put_str(b, k);
    put_str(b, v);
}

pub(super) fn get_pair(b: &mut &[u8]) -> Option<(String, String)> {
    Some((get_str(b)?, get_str(b)?))
}

fn put_info(b: &mut BytesMut, t: &TopicInfo) {
    put_str(b, &t.name);
    b.put_i32(t.partitions);
    b.put_i16(t.replication_factor);
    put_list(b, &t.configs, put_pair);
}

fn get_info(b: &mut &[u8]) -> Option<TopicInfo> {
    Some(TopicInfo {
        name: get_str(b)?,
        partitions: get_i32(b)?,
        replication_factor: get_i16(b)?,
        configs: get_list(b, get_pair)?,
    })
}

fn put_indexes(b: &mut BytesMut, list: &[i16]) {
    put_list(b, list, |b, &i| b.put_i16(i));
}

fn put_subtopology(b: &mut BytesMut, s: &Subtopology) {
    put_str(b, &s.id);
    put_strs(b, &s.source_topics);
    put_strs(b, &s.repartition_sink_topics);
    put_list(b, &s.state_changelog_topics, put_info);
    put_list(b, &s.repartition_source_topics, put_info);
    put_list(b, &s.copartition_groups, |b, g| {
        put_indexes(b, &g.source_topics);
        put_indexes(b, &g.repartition_source_topics);
    });
}

fn get_subtopology(b: &mut &[u8]) -> Option<Subtopology> {
    Some(Subtopology {
        id: get_str(b)?,
        source_topics: get_strs(b)?,
        repartition_sink_topics: get_strs(b)?,
        state_changelog_topics: get_list(b, get_info)?,
        repartition_source_topics: get_list(b, get_info)?,
        copartition_groups: get_list(b, |b| {
            Some(CopartitionGroup {
                source_topics: get_list(b, get_i16)?,
                repartition_source_topics: get_list(b, get_i16)?,
            })
        })?,
    })
}

impl Topology {
    /// The stored form, version 1.
    pub fn encode(&self, b: &mut BytesMut) {
        b.put_u8(1);
        b.put_i32(self.epoch);
        put_list(b, &self.subtopologies, put_subtopology);
    }

    pub fn decode(b: &mut &[u8]) -> Option<Topology> {
        if b.remaining() < 1 || b.get_u8() != 1 {
            return None;
        }
        Some(Topology {
            epoch: get_i32(b)?,
            subtopologies: get_list(b, get_subtopology)?,
        })
    }
}
