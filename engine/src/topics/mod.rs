//! Topic names, configs and creation shared by Metadata and CreateTopics.

use rutomq_meta::TopicRecord;

use crate::limits::TOPIC_NAME_BYTES_MAX;
use crate::records::RecordRules;

/// Kafka's default `max.message.bytes` (its default in [`TOPIC_CONFIGS`]).
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;

pub const RETENTION_MS: &str = "retention.ms";
pub const RETENTION_BYTES: &str = "retention.bytes";
pub const CLEANUP_POLICY: &str = "cleanup.policy";

mod kafka_configs;

pub use kafka_configs::{KAFKA_VERSION, TOPIC_CONFIGS};

/// Every partition's leader epoch, for its whole life. An epoch numbers a
/// history of the log: Kafka bumps it when a new leader may have lost the
/// tail its predecessor had, and clients compare epochs to detect that
/// truncation. A rutomq partition has one history: a record is
/// acknowledged only once PostgreSQL has ordered it, any agent serves it,
/// and a change of the agent Metadata names as leader moves routing, not
/// data; nothing acknowledged is ever truncated. So the epoch never
/// changes, and OffsetForLeaderEpoch answers it with the log end.
pub const LEADER_EPOCH: i32 = 0;

/// `config_source` of a config set on the topic (DYNAMIC_TOPIC_CONFIG).
pub const SOURCE_TOPIC: i8 = 1;
/// `config_source` of a config left at its default (DEFAULT_CONFIG).
pub const SOURCE_DEFAULT: i8 = 5;

/// A topic config's value type (Kafka's `ConfigDef.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    Short,
    Int,
    Long,
    Double,
    String,
    List,
    /// A Java class name (broker configs only).
    Class,
    /// A secret: never shown (broker configs only).
    Password,
}

impl Kind {
    /// The `config_type` DescribeConfigs v3+ reports (`ConfigType` codes).
    pub fn code(self) -> i8 {
        match self {
            Kind::Boolean => 1,
            Kind::String => 2,
            Kind::Int => 3,
            Kind::Short => 4,
            Kind::Long => 5,
            Kind::Double => 6,
            Kind::List => 7,
            Kind::Class => 8,
            Kind::Password => 9,
        }
    }
}

/// What a value must satisfy besides parsing as its [`Kind`] (Kafka's
/// validator of the config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    Any,
    AtLeast(i64),
    Between(i64, i64),
    /// In the range, or exactly the third value.
    BetweenOr(i64, i64, i64),
    Ratio(f64, f64),
    /// A string that is one of these (case-sensitive).
    OneOf(&'static [&'static str]),
    /// A list of distinct items, each one of these.
    EachOf(&'static [&'static str]),
    /// `*`, or a list of `partition:broker` pairs.
    ThrottledReplicas,
    /// `latest`, `earliest` or `by_duration:` and an ISO-8601 duration
    /// that is not negative (`share.auto.offset.reset`).
    OffsetReset,
}

/// One topic config Kafka defines.
#[derive(Clone, Copy, Debug)]
pub struct ConfigSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// Kafka's default, as DescribeConfigs shows it.
    pub default: &'static str,
    pub check: Check,
}

/// What a topic config does on rutomq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Applied,
    /// Accepted, stored and described, with no effect here; why.
    Inert(&'static str),
}

const NO_SEGMENTS: &str =
    "rutomq keeps no log segments or indexes: records live in immutable objects";
const NO_REPLICAS: &str =
    "rutomq has no replicas or leaders: a produce is acknowledged once it is in object storage and PostgreSQL";
const NO_LOCAL_TIER: &str =
    "every record is in object storage already; no agent keeps a local tier";

/// What `name` does here; `None` for a name Kafka does not define. Every
/// name of [`TOPIC_CONFIGS`] has an arm (a test checks it), so a config a
/// newer Kafka adds is classified on purpose when the table is regenerated.
pub fn effect(name: &str) -> Option<Effect> {
    use Effect::{Applied, Inert};
    Some(match name {
        "cleanup.policy" | "retention.ms" | "retention.bytes" | "max.message.bytes" => Applied,
        "delete.retention.ms"
        | "min.compaction.lag.ms"
        | "max.compaction.lag.ms"
        | "min.cleanable.dirty.ratio" => Applied,
        "message.timestamp.type"
        | "message.timestamp.after.max.ms"
        | "message.timestamp.before.max.ms" => Applied,
        "compression.type" | "compression.gzip.level" | "compression.lz4.level" | "compression.zstd.level" => {
            Inert("batches are stored as the producer compressed them (as with compression.type=producer)")
        }
        "file.delete.delay.ms" => Inert(
            "objects retired by retention or compaction are deleted after the agent's --file-delete-delay-ms",
        ),
        "flush.messages" | "flush.ms" => {
            Inert("every acknowledged produce is already durable in object storage and PostgreSQL")
        }
        "segment.bytes" | "segment.ms" | "segment.jitter.ms" | "segment.index.bytes"
        | "index.interval.bytes" | "preallocate" => Inert(NO_SEGMENTS),
        "min.insync.replicas"
        | "unclean.leader.election.enable"
        | "leader.replication.throttled.replicas"
        | "follower.replication.throttled.replicas" => Inert(NO_REPLICAS),
        "local.retention.ms"
        | "local.retention.bytes"
        | "remote.storage.enable"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable" => Inert(NO_LOCAL_TIER),
        _ => return None,
    })
}

/// The definition of topic config `name`.
pub fn spec(name: &str) -> Option<&'static ConfigSpec> {
    TOPIC_CONFIGS.iter().find(|s| s.name == name)
}

/// The items of a list value, as Kafka splits it (empty: no items).
pub fn list_items(value: &str) -> Vec<&str> {
    let v = value.trim();
    if v.is_empty() {
        return Vec::new();
    }
    v.split(',').map(str::trim).collect()
}

/// Validates a CreateTopics (or alter) config entry the way Kafka's
/// broker does: a known name, a value of its type that passes its check.
/// Values are stored as given.
pub fn valid_config(name: &str, value: Option<&str>) -> Result<(), String> {
    let spec = spec(name).ok_or_else(|| unknown_topic_config(name))?;
    let value = value.ok_or_else(|| format!("topic config {name} needs a value (null given)"))?;
    check_value("topic config", name, spec.kind, spec.check, value)
}

fn unknown_topic_config(name: &str) -> String {
    format!("unknown topic config {name:?} (Apache Kafka {KAFKA_VERSION} defines no such name)")
}

/// Whether `value` is of `kind` and passes `check`, as Kafka's `ConfigDef`
/// parses and validates it; the refusal names the config as `what name`.
pub fn check_value(
    what: &str,
    name: &str,
    kind: Kind,
    check: Check,
    value: &str,
) -> Result<(), String> {
    let v = value.trim();
    let bad = |why: String| Err(format!("invalid value {value:?} for {what} {name}: {why}"));
    let int = |v: &str| -> Result<i64, String> {
        match kind {
            Kind::Short => v.parse::<i16>().map(i64::from),
            Kind::Int => v.parse::<i32>().map(i64::from),
            _ => v.parse::<i64>(),
        }
        .map_err(|_| {
            let ty = match kind {
                Kind::Short => "short",
                Kind::Int => "int",
                _ => "long",
            };
            format!("not a number of type {ty}")
        })
    };
    match kind {
        Kind::Boolean => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return bad("must be true or false".into());
            }
        }
        Kind::Short | Kind::Int | Kind::Long => {
            let n = match int(v) {
                Ok(n) => n,
                Err(why) => return bad(why),
            };
            match check {
                Check::AtLeast(min) if n < min => return bad(format!("must be at least {min}")),
                Check::Between(lo, hi) if n < lo || n > hi => {
                    return bad(format!("must be between {lo} and {hi}"))
                }
                Check::BetweenOr(lo, hi, or) if n != or && (n < lo || n > hi) => {
                    return bad(format!("must be between {lo} and {hi}, or {or}"))
                }
                _ => {}
            }
        }
        Kind::Double => {
            let Ok(x) = v.parse::<f64>() else {
                return bad("not a number of type double".into());
            };
            // Written as Kafka's comparisons are: NaN passes them.
            if let Check::Ratio(lo, hi) = check {
                if x < lo || x > hi {
                    return bad(format!("must be between {lo} and {hi}"));
                }
            }
        }
        Kind::String => match check {
            Check::OneOf(allowed) if !allowed.contains(&v) => {
                return bad(format!("must be one of {}", allowed.join(", ")));
            }
            Check::OffsetReset if !valid_offset_reset(v) => {
                return bad("must be latest, earliest or by_duration:<ISO-8601 duration>".into());
            }
            _ => {}
        },
        Kind::List => {
            let items = list_items(v);
            match check {
                Check::EachOf(allowed) => {
                    if let Some(i) = items.iter().find(|i| !allowed.contains(i)) {
                        return bad(format!("{i:?} is not one of {}", allowed.join(", ")));
                    }
                    let mut seen = items.clone();
                    seen.sort_unstable();
                    if seen.windows(2).any(|w| w[0] == w[1]) {
                        return bad("an item is repeated".into());
                    }
                }
                Check::ThrottledReplicas => {
                    let pair = |i: &str| {
                        i.split_once(':').is_some_and(|(p, b)| {
                            [p, b]
                                .iter()
                                .all(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
                        })
                    };
                    if !(items == ["*"] || items.iter().all(|i| pair(i))) {
                        return bad(
                            "must be * or partition:broker pairs separated by commas".into()
                        );
                    }
                }
                _ => {}
            }
        }
        Kind::Class | Kind::Password => {}
    }
    Ok(())
}

/// `latest`, `earliest`, or `by_duration:` with a non-negative ISO-8601
/// duration (`PnDTnHnMn.nS`, Java's `Duration.parse`).
fn valid_offset_reset(v: &str) -> bool {
    if v == "latest" || v == "earliest" {
        return true;
    }
    let Some(d) = v.strip_prefix("by_duration:") else {
        return false;
    };
    let Some(rest) = d.strip_prefix('P').or_else(|| d.strip_prefix('p')) else {
        return false;
    };
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((days, time)) => (days, Some(time)),
        None => (rest, None),
    };
    // Each part: digits (seconds may have a fraction) and its unit letter.
    let parts = |s: &str, units: &[char]| -> Option<usize> {
        let mut n = 0;
        let mut from = 0;
        for (i, c) in s.char_indices() {
            if c.is_ascii_alphabetic() {
                let u = c.to_ascii_uppercase();
                let num = &s[from..i];
                let ok_num = !num.is_empty()
                    && num.split_once('.').map_or(
                        num.bytes().all(|b| b.is_ascii_digit()),
                        |(a, b)| {
                            u == 'S'
                                && !a.is_empty()
                                && !b.is_empty()
                                && a.bytes().chain(b.bytes()).all(|b| b.is_ascii_digit())
                        },
                    );
                if !units.contains(&u) || !ok_num {
                    return None;
                }
                n += 1;
                from = i + 1;
            }
        }
        (from == s.len()).then_some(n)
    };
    let (Some(d), t) = (
        parts(days, &['D']),
        time.map(|t| parts(t, &['H', 'M', 'S'])),
    ) else {
        return false;
    };
    match t {
        None => d == 1,
        Some(Some(t)) => t > 0,
        Some(None) => false,
    }
}

/// An IncrementalAlterConfigs operation (Kafka's `AlterConfigOp.OpType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlterOp {
    Set,
    Delete,
    /// Adds items to a list config (those not in it already).
    Append,
    /// Removes items from a list config.
    Subtract,
}

impl AlterOp {
    pub fn from_code(code: i8) -> Option<AlterOp> {
        Some(match code {
            0 => AlterOp::Set,
            1 => AlterOp::Delete,
            2 => AlterOp::Append,
            3 => AlterOp::Subtract,
            _ => return None,
        })
    }
}

/// A topic's configs after `ops` (Kafka's IncrementalAlterConfigs
/// semantics: APPEND and SUBTRACT start from the default when the topic
/// sets none), each result validated as CreateTopics validates. Deleting a
/// config the topic does not set is no change.
pub fn apply_ops(
    configs: Vec<(String, String)>,
    ops: &[(&str, AlterOp, Option<&str>)],
) -> Result<Vec<(String, String)>, String> {
    let lookup = |name: &str| {
        spec(name)
            .map(|s| (s.kind, s.default))
            .ok_or_else(|| unknown_topic_config(name))
    };
    let configs = apply_ops_with(configs, ops, "topic config", lookup, valid_config)?;
    valid_together(&configs)?;
    Ok(configs)
}

/// A resource's configs after `ops`, for any kind of resource: `lookup`
/// gives a config's kind and default (APPEND and SUBTRACT start from the
/// default when the resource sets none) or refuses its name; `valid`
/// checks each value set.
pub fn apply_ops_with<E: From<String>>(
    mut configs: Vec<(String, String)>,
    ops: &[(&str, AlterOp, Option<&str>)],
    what: &str,
    lookup: impl Fn(&str) -> Result<(Kind, &'static str), E>,
    valid: impl Fn(&str, Option<&str>) -> Result<(), E>,
) -> Result<Vec<(String, String)>, E> {
    for &(name, op, value) in ops {
        let next = match op {
            AlterOp::Delete => None,
            AlterOp::Set => {
                valid(name, value)?;
                value.map(str::to_owned)
            }
            AlterOp::Append | AlterOp::Subtract => {
                let (kind, default) = lookup(name)?;
                if kind != Kind::List {
                    return Err(E::from(format!(
                        "{op:?} applies to list configs only; {what} {name} is not a list"
                    )));
                }
                let given = value.ok_or_else(|| {
                    E::from(format!(
                        "{op:?} of {what} {name} needs a value (null given)"
                    ))
                })?;
                let given = list_items(given);
                let mut items: Vec<&str> = list_items(value_of(&configs, name).unwrap_or(default));
                if op == AlterOp::Append {
                    for g in given {
                        if !items.contains(&g) {
                            items.push(g);
                        }
                    }
                } else {
                    items.retain(|i| !given.contains(i));
                }
                let joined = items.join(",");
                valid(name, Some(&joined))?;
                Some(joined)
            }
        };
        configs.retain(|(k, _)| k != name);
        configs.extend(next.map(|v| (name.to_owned(), v)));
    }
    Ok(configs)
}

/// Checks that hold between configs (Kafka's `LogConfig.validateValues`
/// part that applies here): `configs` are the topic's own, validated one by
/// one already.
pub fn valid_together(configs: &[(String, String)]) -> Result<(), String> {
    let get = |n: &str| {
        value_in(configs, &TopicDefaults::NONE, n)?
            .trim()
            .parse::<i64>()
            .ok()
    };
    if let (Some(min), Some(max)) = (get("min.compaction.lag.ms"), get("max.compaction.lag.ms")) {
        if min > max {
            return Err(format!(
                "min.compaction.lag.ms {min} is above max.compaction.lag.ms {max}"
            ));
        }
    }
    Ok(())
}

/// Topic configs' defaults set for the whole cluster at runtime (the
/// dynamic broker configs of the cluster default that Kafka takes as
/// topic defaults: `log.retention.ms` for `retention.ms`, ...), by topic
/// config name, values in the topic config's unit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicDefaults(pub Vec<(&'static str, String)>);

impl TopicDefaults {
    /// No defaults set: Kafka's own apply.
    pub const NONE: TopicDefaults = TopicDefaults(Vec::new());

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The topic's value of config `name`: its own, the cluster's default or
/// Kafka's.
pub fn config_value<'a>(t: &'a TopicRecord, d: &'a TopicDefaults, name: &str) -> Option<&'a str> {
    value_in(&t.configs, d, name)
}

/// Config `name` among `configs`, or its default.
fn value_in<'a>(
    configs: &'a [(String, String)],
    d: &'a TopicDefaults,
    name: &str,
) -> Option<&'a str> {
    value_of(configs, name).or_else(|| d.get(name).or_else(|| spec(name).map(|s| s.default)))
}

/// The value `configs` (a resource's own, by name) give config `name`.
pub fn value_of<'a>(configs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    configs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// What the topic asks of records produced at `now_ms`, and whether they
/// are stamped with the broker's time (`message.timestamp.type` =
/// LogAppendTime, whose topics check no client timestamps).
pub fn record_rules(t: &TopicRecord, d: &TopicDefaults, now_ms: i64) -> (RecordRules, bool) {
    let stamp =
        config_value(t, d, "message.timestamp.type").is_some_and(|v| v.trim() == "LogAppendTime");
    let bound = |name| config_i64(t, d, name).unwrap_or(i64::MAX);
    let timestamps = (!stamp).then(|| {
        (
            now_ms.saturating_sub(bound("message.timestamp.before.max.ms")),
            now_ms.saturating_add(bound("message.timestamp.after.max.ms")),
        )
    });
    let rules = RecordRules {
        keys_required: is_compacted(t, d),
        timestamps,
    };
    (rules, stamp)
}

/// Whether the topic's `cleanup.policy` includes compaction (on the
/// produce path: no allocation).
pub fn is_compacted(t: &TopicRecord, d: &TopicDefaults) -> bool {
    has_policy(t, d, "compact")
}

/// Whether the topic's `cleanup.policy` includes time and size retention.
pub fn is_deleting(t: &TopicRecord, d: &TopicDefaults) -> bool {
    has_policy(t, d, "delete")
}

fn has_policy(t: &TopicRecord, d: &TopicDefaults, policy: &str) -> bool {
    config_value(t, d, CLEANUP_POLICY).is_some_and(|v| v.split(',').any(|i| i.trim() == policy))
}

/// Kafka's topic name rule: 1–249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(format!(
            "topic name must be 1 to {TOPIC_NAME_BYTES_MAX} characters"
        ));
    }
    if name == "." || name == ".." {
        return Err("topic name cannot be '.' or '..'".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "topic name {name:?} has characters other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// What a compacted topic's configs ask of the compactor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompactionConfig {
    /// How long tombstones and markers with no data stay once a pass saw
    /// them (`delete.retention.ms`).
    pub delete_retention_ms: i64,
    /// Records newer than this are not compacted (`min.compaction.lag.ms`).
    pub min_lag_ms: i64,
    /// Dirty records older than this are compacted whatever the dirty
    /// ratio (`max.compaction.lag.ms`).
    pub max_lag_ms: i64,
    /// A pass runs when dirty bytes / retained bytes exceed this
    /// (`min.cleanable.dirty.ratio`).
    pub min_dirty_ratio: f64,
}

pub fn compaction_config(t: &TopicRecord, d: &TopicDefaults) -> CompactionConfig {
    let ms = |name, default| {
        config_i64(t, d, name)
            .filter(|&v| v >= 0)
            .unwrap_or(default)
    };
    CompactionConfig {
        delete_retention_ms: ms("delete.retention.ms", 86_400_000),
        min_lag_ms: ms("min.compaction.lag.ms", 0),
        max_lag_ms: ms("max.compaction.lag.ms", i64::MAX),
        min_dirty_ratio: config_value(t, d, "min.cleanable.dirty.ratio")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.5),
    }
}

/// An integer config of the topic, or its default.
pub fn config_i64(t: &TopicRecord, d: &TopicDefaults, name: &str) -> Option<i64> {
    config_value(t, d, name)?.trim().parse().ok()
}

/// The topic's max.message.bytes.
pub fn max_message_bytes(t: &TopicRecord, d: &TopicDefaults) -> usize {
    config_i64(t, d, "max.message.bytes")
        .and_then(|v| usize::try_from(v).ok())
        .unwrap_or(MAX_MESSAGE_BYTES_DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_max_message_bytes_is_the_config_tables() {
        let table =
            spec("max.message.bytes").map(|s| s.default.parse::<usize>().expect("a number"));
        assert_eq!(table, Some(MAX_MESSAGE_BYTES_DEFAULT));
    }

    #[test]
    fn incremental_operations_apply_as_kafka_applies_them() {
        use AlterOp::*;
        let set = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let start = set(&[("retention.ms", "1000")]);
        // SET replaces, DELETE removes (a config not set: no change).
        let out = apply_ops(
            start.clone(),
            &[
                ("retention.ms", Delete, None),
                ("max.message.bytes", Set, Some("2000")),
                ("flush.ms", Delete, None),
            ],
        );
        assert_eq!(out, Ok(set(&[("max.message.bytes", "2000")])));
        // APPEND starts from the default ("delete") and skips what is there.
        let out = apply_ops(
            Vec::new(),
            &[
                ("retention.ms", Set, Some("1234")),
                ("cleanup.policy", Append, Some("compact")),
            ],
        );
        assert_eq!(
            out,
            Ok(set(&[
                ("retention.ms", "1234"),
                ("cleanup.policy", "delete,compact")
            ]))
        );
        let out = apply_ops(
            start.clone(),
            &[("cleanup.policy", Append, Some("compact,delete"))],
        );
        assert_eq!(
            out,
            Ok(set(&[
                ("retention.ms", "1000"),
                ("cleanup.policy", "delete,compact")
            ]))
        );
        let out = apply_ops(
            set(&[("cleanup.policy", "compact,delete")]),
            &[("cleanup.policy", Subtract, Some("delete"))],
        );
        assert_eq!(out, Ok(set(&[("cleanup.policy", "compact")])));
        // Refused: lists only for APPEND/SUBTRACT, values checked, names known,
        // the configs checked together after all operations.
        assert!(apply_ops(start.clone(), &[("retention.ms", Append, Some("5"))]).is_err());
        assert!(apply_ops(start.clone(), &[("retention.ms", Set, Some("-2"))]).is_err());
        assert!(apply_ops(start.clone(), &[("retention.ms", Set, None)]).is_err());
        assert!(apply_ops(start.clone(), &[("no.such.config", Set, Some("1"))]).is_err());
        assert!(apply_ops(start.clone(), &[("cleanup.policy", Append, Some("shred"))]).is_err());
        let crossed = [
            ("min.compaction.lag.ms", Set, Some("10")),
            ("max.compaction.lag.ms", Set, Some("5")),
        ];
        assert!(apply_ops(start, &crossed).is_err());
    }

    #[test]
    fn every_kafka_topic_config_is_classified_and_its_default_valid() {
        for s in TOPIC_CONFIGS {
            assert!(effect(s.name).is_some(), "{} has no effect arm", s.name);
            assert_eq!(valid_config(s.name, Some(s.default)), Ok(()), "{}", s.name);
        }
        assert_eq!(effect("log.retention.ms"), None);
    }

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        let ok = |n: &str, v: &str| valid_config(n, Some(v)).is_ok();
        assert!(ok("cleanup.policy", "compact,delete"));
        assert!(ok("cleanup.policy", " delete , compact "));
        assert!(ok("cleanup.policy", ""));
        assert!(!ok("cleanup.policy", "Compact"));
        assert!(!ok("cleanup.policy", "compact,compact"));
        assert!(!ok("cleanup.policy", "compact,,delete"));
        assert!(ok("retention.ms", " -1 "));
        assert!(!ok("retention.ms", "-2"));
        assert!(ok("retention.bytes", "-5"));
        assert!(!ok("max.message.bytes", "0x10"));
        assert!(!ok("max.message.bytes", "3000000000"));
        assert!(ok("segment.bytes", "+1048576"));
        assert!(!ok("segment.bytes", "1048575"));
        assert!(ok("preallocate", "TRUE"));
        assert!(!ok("preallocate", "yes"));
        assert!(!ok("min.cleanable.dirty.ratio", "1.5"));
        assert!(ok("min.cleanable.dirty.ratio", "1e-1"));
        assert!(ok("compression.gzip.level", "-1"));
        assert!(!ok("compression.gzip.level", "0"));
        assert!(!ok("message.timestamp.type", "createtime"));
        assert!(ok("leader.replication.throttled.replicas", "*"));
        assert!(ok("leader.replication.throttled.replicas", "0:1, 1:2"));
        assert!(!ok("leader.replication.throttled.replicas", "0:x"));
        assert!(valid_config("cleanup.policy", None).is_err());
        assert!(valid_config("no.such.config", Some("1")).is_err());
    }

    #[test]
    fn compaction_lags_must_not_cross() {
        let c = |a: &str, b: &str| {
            vec![
                ("min.compaction.lag.ms".to_owned(), a.to_owned()),
                ("max.compaction.lag.ms".to_owned(), b.to_owned()),
            ]
        };
        assert!(valid_together(&c("10", "20")).is_ok());
        assert!(valid_together(&c("30", "20")).is_err());
        assert!(valid_together(&[("min.compaction.lag.ms".into(), "5".into())]).is_ok());
    }
}
