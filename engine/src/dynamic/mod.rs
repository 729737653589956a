//! Dynamic configs: broker configs set at runtime (per agent, or the
//! cluster default that Kafka's `--entity-default` names), group configs
//! and client-metrics subscriptions. Stored in PostgreSQL
//! (`dynamic_configs`); every agent keeps the whole set ([`Dynamic`]),
//! reloaded when `rutomq_configs` announces a change, so a change applies
//! to every agent without a restart.
//!
//! What each broker config does here ([`broker_effect`]): the cluster
//! defaults of topic configs (`log.retention.ms`, `message.max.bytes`, ...)
//! are applied to every topic that sets none of its own; configs rutomq
//! sets another way (its flags, its TLS files) are refused with where to
//! set them; Kafka's other dynamic configs tune broker internals rutomq
//! does not have and are stored and described with no effect; Kafka's
//! read-only configs are refused as Kafka refuses them.

mod kafka_configs;

use std::collections::BTreeMap;
use std::sync::Arc;

use rutomq_meta::dynamic::DynamicConfig;

use crate::control::{AgentCopy, ShardCopy};
use crate::error::ErrorCode;
use crate::topics::{self, check_value, value_of, AlterOp, Check, ConfigSpec, Kind, TopicDefaults};

pub use kafka_configs::{BROKER_CONFIGS, GROUP_CONFIGS, TOPIC_SYNONYMS};

/// `ConfigResource.Type` codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = 32;

/// `config_source` codes of DescribeConfigs (besides `topics::SOURCE_*`).
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DYNAMIC_BROKER_LOGGER: i8 = 6;
pub const SOURCE_CLIENT_METRICS: i8 = 7;
pub const SOURCE_GROUP: i8 = 8;

/// One broker config Kafka defines.
#[derive(Clone, Copy, Debug)]
pub struct BrokerSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// Kafka's default, as DescribeConfigs shows it.
    pub default: Option<&'static str>,
    pub mode: Mode,
    pub check: Check,
}

/// Whether a running Kafka broker takes a config (`DynamicBrokerConfig`'s
/// update modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    ReadOnly,
    /// Per broker only, never at the cluster default.
    PerBroker,
    /// Per broker or at the cluster default.
    ClusterWide,
}

/// The unit of a broker config that defaults a topic config in
/// milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Same,
    Minutes,
    Hours,
}

impl Unit {
    /// `value` in the topic config's unit (unparsable values as given).
    fn convert(self, value: &str) -> String {
        let factor = match self {
            Unit::Same => return value.to_owned(),
            Unit::Minutes => 60_000,
            Unit::Hours => 3_600_000,
        };
        value.trim().parse::<i64>().map_or_else(
            |_| value.to_owned(),
            |v| v.saturating_mul(factor).to_string(),
        )
    }
}

/// Kafka's definition of broker config `name`.
pub fn broker_spec(name: &str) -> Option<&'static BrokerSpec> {
    BROKER_CONFIGS
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .map(|i| &BROKER_CONFIGS[i])
}

/// Kafka's definition of group config `name`.
pub fn group_spec(name: &str) -> Option<&'static ConfigSpec> {
    GROUP_CONFIGS.iter().find(|s| s.name == name)
}

/// The broker configs that default topic config `topic`, in Kafka's
/// order of precedence.
pub fn topic_synonyms(topic: &str) -> &'static [(&'static str, Unit)] {
    TOPIC_SYNONYMS
        .iter()
        .find(|(t, _)| *t == topic)
        .map_or(&[], |(_, s)| s)
}

/// The topic config broker config `name` defaults, if any.
fn topic_of(name: &str) -> Option<(&'static str, Unit)> {
    TOPIC_SYNONYMS.iter().find_map(|(t, syns)| {
        syns.iter()
            .find(|(b, _)| *b == name)
            .map(|(_, unit)| (*t, *unit))
    })
}

/// What setting broker config `name` at runtime does on rutomq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerEffect {
    /// The cluster default of this topic config.
    TopicDefault(&'static str),
    /// Kafka's broker takes it at runtime; rutomq stores it with no effect.
    Inert,
    /// rutomq sets it another way: refused, saying where.
    Elsewhere(&'static str),
    /// Read-only in Kafka as well.
    ReadOnly,
    /// A name Kafka does not define: stored as Kafka stores it (and
    /// described as sensitive, its value hidden).
    Custom,
}

/// The agent settings reported as broker configs (`api::config_support`'s
/// list): set by flags.
const FLAG_SET: &[(&str, &str)] = &[
    ("listeners", "--listeners"),
    ("advertised.listeners", "--advertised-listeners"),
    (
        "listener.security.protocol.map",
        "--listener-security-protocol-map",
    ),
    ("sasl.enabled.mechanisms", "--sasl-enabled-mechanisms"),
];

pub fn broker_effect(name: &str) -> BrokerEffect {
    if let Some((topic, _)) = topic_of(name) {
        if broker_spec(name).is_some_and(|s| s.mode != Mode::ReadOnly) {
            return BrokerEffect::TopicDefault(topic);
        }
    }
    let Some(spec) = broker_spec(name) else {
        return BrokerEffect::Custom;
    };
    if spec.mode == Mode::ReadOnly {
        return BrokerEffect::ReadOnly;
    }
    if let Some((_, flag)) = FLAG_SET.iter().find(|(n, _)| *n == name) {
        return BrokerEffect::Elsewhere(flag);
    }
    if name.starts_with("ssl.") {
        return BrokerEffect::Elsewhere(
            "the agent's --ssl-* flags (its PEM files reload on SIGHUP or when they change)",
        );
    }
    if name.starts_with("max.connection") {
        return BrokerEffect::Elsewhere(
            "connection_creation_rate client quotas (kafka-configs --entity-type ips); connections per shard are capped at 10000",
        );
    }
    if matches!(name, "sasl.jaas.config" | "principal.builder.class") {
        return BrokerEffect::Elsewhere(
            "SCRAM users (kafka-configs --entity-type users) and --ssl-principal-mapping-rules",
        );
    }
    BrokerEffect::Inert
}

/// Why an alteration of one resource is refused: its error code and
/// message.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal::new(ErrorCode::InvalidRequest, message)
    }
}

/// One operation on one config: its name, the operation, its value.
pub type Op<'a> = (&'a str, AlterOp, Option<&'a str>);

/// Refuses names and values past the named limits (every agent holds every
/// dynamic config).
fn bounded(ops: &[Op]) -> Result<(), Refusal> {
    use crate::limits::{DYNAMIC_CONFIG_NAME_BYTES_MAX, DYNAMIC_CONFIG_VALUE_BYTES_MAX};
    for (name, _, value) in ops {
        if name.len() > DYNAMIC_CONFIG_NAME_BYTES_MAX
            || value.is_some_and(|v| v.len() > DYNAMIC_CONFIG_VALUE_BYTES_MAX)
        {
            return Err(Refusal::new(
                ErrorCode::InvalidConfig,
                format!(
                    "config names are at most {DYNAMIC_CONFIG_NAME_BYTES_MAX} bytes and values {DYNAMIC_CONFIG_VALUE_BYTES_MAX} on rutomq"
                ),
            ));
        }
    }
    Ok(())
}

/// A broker resource's configs after `ops`, checked as Kafka's broker
/// checks them (INVALID_REQUEST with Kafka's words) and as rutomq can
/// apply them: `default` is the cluster default (`--entity-default`),
/// otherwise one agent's.
pub fn alter_broker(
    current: Vec<(String, String)>,
    ops: &[Op],
    default: bool,
) -> Result<Vec<(String, String)>, Refusal> {
    bounded(ops)?;
    for &(name, _, _) in ops {
        let refuse = |msg: String| Err(Refusal::new(ErrorCode::InvalidRequest, msg));
        match broker_effect(name) {
            BrokerEffect::ReadOnly => {
                return refuse(format!("Cannot update these configs dynamically: Set({name})"))
            }
            BrokerEffect::Elsewhere(how) => {
                return refuse(format!(
                    "Cannot update these configs dynamically: Set({name}); on rutomq it is set by {how}"
                ))
            }
            BrokerEffect::TopicDefault(topic) if !default => {
                return refuse(format!(
                    "{name} defaults topic config {topic}, and any agent serves any partition: \
                     on rutomq it is set for the whole cluster only (--entity-default)"
                ))
            }
            _ if default && broker_spec(name).is_some_and(|s| s.mode == Mode::PerBroker) => {
                return refuse(format!(
                    "Cannot update these configs at default cluster level, broker id must be specified: Set({name})"
                ))
            }
            _ => {}
        }
    }
    let lookup = |name: &str| -> Result<(Kind, &'static str), Refusal> {
        let s = broker_spec(name)
            .ok_or_else(|| format!("unknown broker config {name:?} is not a list"))?;
        Ok((s.kind, s.default.unwrap_or("")))
    };
    let valid = |name: &str, value: Option<&str>| -> Result<(), Refusal> {
        let value =
            value.ok_or_else(|| format!("broker config {name} needs a value (null given)"))?;
        if let Some(s) = broker_spec(name) {
            check_value("broker config", name, s.kind, s.check, value)?;
        }
        if let BrokerEffect::TopicDefault(topic) = broker_effect(name) {
            let unit = topic_of(name).map_or(Unit::Same, |(_, u)| u);
            topics::valid_config(topic, Some(&unit.convert(value)))?;
        }
        Ok(())
    };
    topics::apply_ops_with(current, ops, "broker config", lookup, valid)
}

/// The bounds Kafka's broker puts on a group config (its
/// `group.*.min/max.*` broker configs, at their defaults here).
fn group_bounds(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "consumer.session.timeout.ms" => (
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        "consumer.heartbeat.interval.ms" => (
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
        "share.session.timeout.ms" => (
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
        "share.heartbeat.interval.ms" => (
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
        "share.record.lock.duration.ms" => (
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
        "streams.session.timeout.ms" => (
            "group.streams.min.session.timeout.ms",
            "group.streams.max.session.timeout.ms",
        ),
        "streams.heartbeat.interval.ms" => (
            "group.streams.min.heartbeat.interval.ms",
            "group.streams.max.heartbeat.interval.ms",
        ),
        "streams.num.standby.replicas" => ("", "group.streams.max.standby.replicas"),
        _ => return None,
    })
}

/// A group's configs after `ops`, checked as Kafka's `GroupConfig`
/// checks them (INVALID_CONFIG with Kafka's words), within the bounds the
/// broker configs set (`read_only`: those a flag set; Kafka's defaults
/// for the rest).
pub fn alter_group(
    current: Vec<(String, String)>,
    ops: &[Op],
    read_only: &[(&str, i64)],
) -> Result<Vec<(String, String)>, Refusal> {
    bounded(ops)?;
    let invalid = |msg: String| Refusal::new(ErrorCode::InvalidConfig, msg);
    let lookup = |name: &str| {
        group_spec(name)
            .map(|s| (s.kind, s.default))
            .ok_or_else(|| invalid(format!("Unknown group config name: {name}")))
    };
    let valid = |name: &str, value: Option<&str>| -> Result<(), Refusal> {
        let spec = group_spec(name)
            .ok_or_else(|| invalid(format!("Unknown group config name: {name}")))?;
        let value = value
            .ok_or_else(|| invalid(format!("group config {name} needs a value (null given)")))?;
        check_value("group config", name, spec.kind, spec.check, value).map_err(invalid)?;
        let Some((min, max)) = group_bounds(name) else {
            return Ok(());
        };
        let n: i64 = value.trim().parse().unwrap_or(0);
        let bound = |b: &str| match read_only.iter().find(|(n, _)| *n == b) {
            Some(&(_, v)) => Some(v),
            None => broker_spec(b).and_then(|s| s.default?.parse::<i64>().ok()),
        };
        if bound(min).is_some_and(|lo| n < lo) {
            return Err(invalid(format!(
                "{name} must be greater than or equal to {min}"
            )));
        }
        if bound(max).is_some_and(|hi| n > hi) {
            return Err(invalid(format!(
                "{name} must be less than or equal to {max}"
            )));
        }
        Ok(())
    };
    let next = topics::apply_ops_with(current, ops, "group config", lookup, valid)?;
    // Kafka: the heartbeat interval must be below the session timeout.
    let get = |n: &str| {
        value_of(&next, n)
            .unwrap_or(group_spec(n).map_or("", |s| s.default))
            .parse::<i64>()
            .ok()
    };
    for kind in ["consumer", "share", "streams"] {
        let (s, h) = (
            format!("{kind}.session.timeout.ms"),
            format!("{kind}.heartbeat.interval.ms"),
        );
        if let (Some(session), Some(beat)) = (get(&s), get(&h)) {
            if beat >= session {
                return Err(invalid(format!("{h} must be less than {s}")));
            }
        }
    }
    Ok(next)
}

/// A dynamic resource's configs after `ops`, as its type checks them
/// (`default`: the cluster default of brokers; `read_only`: the read-only
/// broker configs flags set).
pub fn alter(
    resource_type: i8,
    default: bool,
    current: Vec<(String, String)>,
    ops: &[Op],
    read_only: &[(&str, i64)],
) -> Result<Vec<(String, String)>, Refusal> {
    match resource_type {
        RESOURCE_BROKER => alter_broker(current, ops, default),
        RESOURCE_GROUP => alter_group(current, ops, read_only),
        RESOURCE_CLIENT_METRICS => alter_client_metrics(current, ops),
        other => Err(Refusal::from(format!(
            "resource type {other} has no dynamic configs"
        ))),
    }
}

/// Client-metrics subscription configs (KIP-714).
pub const CLIENT_METRICS_CONFIGS: &[ConfigSpec] = &[
    ConfigSpec {
        name: "interval.ms",
        kind: Kind::Int,
        default: "300000",
        check: Check::Between(100, 3_600_000),
    },
    ConfigSpec {
        name: "match",
        kind: Kind::List,
        default: "",
        check: Check::Any,
    },
    ConfigSpec {
        name: "metrics",
        kind: Kind::List,
        default: "",
        check: Check::Any,
    },
];

/// What a client-metrics `match` may select on.
pub const MATCH_KEYS: &[&str] = &[
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];

/// A subscription's configs after `ops`, checked as Kafka checks them.
pub fn alter_client_metrics(
    current: Vec<(String, String)>,
    ops: &[Op],
) -> Result<Vec<(String, String)>, Refusal> {
    bounded(ops)?;
    let lookup = |name: &str| {
        CLIENT_METRICS_CONFIGS
            .iter()
            .find(|s| s.name == name)
            .map(|s| (s.kind, s.default))
            .ok_or_else(|| Refusal::from(format!("Unknown client metrics configuration: {name}")))
    };
    let valid = |name: &str, value: Option<&str>| -> Result<(), Refusal> {
        lookup(name)?;
        let value = value
            .ok_or_else(|| format!("client metrics config {name} needs a value (null given)"))?;
        match name {
            "interval.ms" => match value.trim().parse::<i32>() {
                Ok(v) if (100..=3_600_000).contains(&v) => Ok(()),
                _ => Err(Refusal::from(format!(
                    "Invalid value {value} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
                ))),
            },
            "match" => match_patterns(value).map(|_| ()),
            _ => Ok(()),
        }
    };
    topics::apply_ops_with(current, ops, "client metrics config", lookup, valid)
}

/// A `match` value's patterns (`key=regex`, comma separated), or Kafka's
/// refusal.
pub fn match_patterns(value: &str) -> Result<Vec<(&'static str, regex::Regex)>, Refusal> {
    let items = topics::list_items(value);
    if items.len() > crate::limits::CLIENT_MATCH_PATTERNS_MAX {
        return Err(Refusal::new(
            ErrorCode::InvalidConfig,
            format!(
                "at most {} match patterns",
                crate::limits::CLIENT_MATCH_PATTERNS_MAX
            ),
        ));
    }
    items
        .into_iter()
        .map(|item| {
            let illegal = || {
                Refusal::new(
                    ErrorCode::InvalidConfig,
                    format!("Illegal client matching pattern: {item}"),
                )
            };
            let (key, pattern) = item.split_once('=').ok_or_else(illegal)?;
            let key = MATCH_KEYS
                .iter()
                .find(|k| **k == key.trim())
                .ok_or_else(illegal)?;
            let re = regex::RegexBuilder::new(&format!("^(?:{})$", pattern.trim()))
                .size_limit(crate::limits::CLIENT_MATCH_REGEX_BYTES)
                .build()
                .map_err(|_| illegal())?;
            Ok((*key, re))
        })
        .collect()
}

/// A client-metrics subscription (KIP-714), parsed.
#[derive(Clone, Debug)]
pub struct Subscription {
    pub name: String,
    /// Metric name prefixes; empty: none, `*`: all.
    pub metrics: Vec<String>,
    pub interval_ms: i32,
    pub matches: Vec<(&'static str, regex::Regex)>,
}

/// Every dynamic config an agent knows, as loaded from PostgreSQL, with
/// what it derives from them.
#[derive(Debug, Default)]
pub struct Configs {
    by_resource: BTreeMap<(i8, String), Vec<(String, String)>>,
    topic_defaults: TopicDefaults,
    subscriptions: Vec<Subscription>,
}

impl Configs {
    pub fn new(rows: Vec<DynamicConfig>) -> Configs {
        let mut by_resource: BTreeMap<(i8, String), Vec<(String, String)>> = BTreeMap::new();
        for r in rows {
            by_resource
                .entry((r.resource_type, r.resource))
                .or_default()
                .push((r.name, r.value));
        }
        let cluster = by_resource
            .get(&(RESOURCE_BROKER, String::new()))
            .map_or(&[][..], Vec::as_slice);
        // Per topic config, the first of its synonyms set (Kafka's
        // precedence), in the topic config's unit.
        let topic_defaults = TOPIC_SYNONYMS
            .iter()
            .filter_map(|(topic, syns)| {
                syns.iter().find_map(|(b, unit)| {
                    cluster
                        .iter()
                        .find(|(n, _)| n == b)
                        .map(|(_, v)| (*topic, unit.convert(v)))
                })
            })
            .collect();
        let subscriptions = by_resource
            .range(
                (RESOURCE_CLIENT_METRICS, String::new())
                    ..(RESOURCE_CLIENT_METRICS + 1, String::new()),
            )
            .map(|((_, name), configs)| {
                let get = |n| value_of(configs, n).unwrap_or("");
                Subscription {
                    name: name.clone(),
                    metrics: topics::list_items(get("metrics"))
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                    interval_ms: get("interval.ms").trim().parse().unwrap_or(300_000),
                    // Checked when stored; one that no longer parses matches nothing.
                    matches: match_patterns(get("match")).unwrap_or_else(|_| {
                        vec![(
                            "client_id",
                            regex::Regex::new("[^\\s\\S]").expect("a valid regex"),
                        )]
                    }),
                }
            })
            .collect();
        Configs {
            by_resource,
            topic_defaults: TopicDefaults(topic_defaults),
            subscriptions,
        }
    }

    /// The configs resource `name` of type `resource_type` sets, by name.
    pub fn of(&self, resource_type: i8, name: &str) -> &[(String, String)] {
        self.by_resource
            .get(&(resource_type, name.to_owned()))
            .map_or(&[], Vec::as_slice)
    }

    /// The names of the resources of `resource_type` that set configs.
    pub fn resources(&self, resource_type: i8) -> impl Iterator<Item = &str> {
        self.by_resource
            .range((resource_type, String::new())..)
            .take_while(move |((t, _), _)| *t == resource_type)
            .map(|((_, n), _)| n.as_str())
    }

    /// The topic config defaults set for the cluster.
    pub fn topic_defaults(&self) -> &TopicDefaults {
        &self.topic_defaults
    }

    /// The client-metrics subscriptions.
    pub fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    /// Group config `name` of `group`, when the group sets it.
    pub fn group_value(&self, group: &str, name: &str) -> Option<String> {
        value_of(self.of(RESOURCE_GROUP, group), name).map(str::to_owned)
    }

    /// Group config `name` of `group` in milliseconds, when the group sets
    /// it.
    pub fn group_ms(&self, group: &str, name: &str) -> Option<u64> {
        value_of(self.of(RESOURCE_GROUP, group), name)?
            .trim()
            .parse()
            .ok()
    }
}

/// An agent's dynamic configs.
pub struct Dynamic {
    pub copy: AgentCopy<Configs>,
}

impl Default for Dynamic {
    fn default() -> Self {
        Dynamic {
            copy: AgentCopy::new(Configs::default()),
        }
    }
}

impl Dynamic {
    /// Loads every dynamic config again (at start, on a notice, after an
    /// alteration).
    pub async fn reload(
        &self,
        meta: &rutomq_meta::Meta,
    ) -> Result<Arc<Configs>, rutomq_meta::MetaError> {
        self.copy
            .reload("dynamic configs", meta.dynamic_load(), Configs::new)
            .await
    }
}

/// One shard's view of the dynamic configs.
pub type ShardConfigs = ShardCopy<Configs>;

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(name: &'a str, value: &'a str) -> Op<'a> {
        (name, AlterOp::Set, Some(value))
    }

    #[test]
    fn broker_configs_are_refused_as_kafka_and_rutomq_refuse_them() {
        let code = |r: Result<Vec<(String, String)>, Refusal>| r.map_err(|e| (e.code, e.message));
        let err = code(alter_broker(vec![], &[set("num.partitions", "3")], false)).unwrap_err();
        assert_eq!(err.0, ErrorCode::InvalidRequest);
        assert!(err
            .1
            .contains("Cannot update these configs dynamically: Set(num.partitions)"));
        let err = code(alter_broker(
            vec![],
            &[set("log.retention.ms", "abc")],
            true,
        ))
        .unwrap_err();
        assert!(err.1.contains("not a number of type long"), "{}", err.1);
        // Per agent: rutomq keeps topic defaults cluster-wide.
        let err = code(alter_broker(
            vec![],
            &[set("log.retention.ms", "1000")],
            false,
        ))
        .unwrap_err();
        assert!(err.1.contains("--entity-default"), "{}", err.1);
        let err = code(alter_broker(
            vec![],
            &[set("sasl.kerberos.min.time.before.relogin", "1")],
            true,
        ))
        .unwrap_err();
        assert!(err.1.contains("broker id must be specified"), "{}", err.1);
        let err = code(alter_broker(
            vec![],
            &[set("listeners", "PLAINTEXT://:1")],
            false,
        ))
        .unwrap_err();
        assert!(err.1.contains("--listeners"), "{}", err.1);
        let ok = alter_broker(
            vec![],
            &[
                set("sasl.kerberos.min.time.before.relogin", "58000"),
                set("my.custom", "x"),
            ],
            false,
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        // A topic default is checked as its topic config is.
        assert!(alter_broker(vec![], &[set("log.cleanup.policy", "shred")], true).is_err());
        assert!(alter_broker(vec![], &[set("log.cleanup.policy", "compact")], true).is_ok());
    }

    #[test]
    fn cluster_defaults_become_topic_defaults_in_the_topic_unit() {
        let row = |name: &str, value: &str| DynamicConfig {
            resource_type: RESOURCE_BROKER,
            resource: String::new(),
            name: name.into(),
            value: value.into(),
        };
        let c = Configs::new(vec![
            row("log.retention.ms", "1000"),
            row("message.max.bytes", "77"),
        ]);
        assert_eq!(c.topic_defaults().get("retention.ms"), Some("1000"));
        assert_eq!(c.topic_defaults().get("max.message.bytes"), Some("77"));
        assert_eq!(Unit::Hours.convert("2"), "7200000");
        // One agent's value is not the cluster's.
        let mine = DynamicConfig {
            resource: "1".into(),
            ..row("log.retention.bytes", "5")
        };
        assert_eq!(
            Configs::new(vec![mine])
                .topic_defaults()
                .get("retention.bytes"),
            None
        );
    }

    #[test]
    fn group_configs_are_bounded_by_the_broker_limits() {
        let err =
            alter_group(vec![], &[set("consumer.session.timeout.ms", "5000")], &[]).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert_eq!(
            err.message,
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
        );
        let err = alter_group(vec![], &[set("foo", "1")], &[]).unwrap_err();
        assert_eq!(err.message, "Unknown group config name: foo");
        assert!(alter_group(vec![], &[set("consumer.session.timeout.ms", "50000")], &[]).is_ok());
        assert!(alter_group(
            vec![],
            &[set("share.auto.offset.reset", "by_duration:PT1H")],
            &[]
        )
        .is_ok());
        assert!(alter_group(
            vec![],
            &[set("share.auto.offset.reset", "by_duration:1H")],
            &[]
        )
        .is_err());
        // A lock of 3 s: below Kafka's default minimum, within one a flag lowered.
        let lock = [set("share.record.lock.duration.ms", "3000")];
        let err = alter_group(vec![], &lock, &[]).unwrap_err();
        assert_eq!(
            err.message,
            "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"
        );
        assert!(alter_group(
            vec![],
            &lock,
            &[("group.share.min.record.lock.duration.ms", 1000)]
        )
        .is_ok());
    }

    #[test]
    fn client_metrics_are_checked_as_kafka_checks_them() {
        let err = alter_client_metrics(vec![], &[set("interval.ms", "10")]).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        let err = alter_client_metrics(vec![], &[set("match", "foo=a")]).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                ErrorCode::InvalidConfig,
                "Illegal client matching pattern: foo=a"
            )
        );
        assert!(alter_client_metrics(vec![], &[set("match", "client_id=(")]).is_err());
        assert_eq!(
            alter_client_metrics(vec![], &[set("bar", "1")])
                .unwrap_err()
                .message,
            "Unknown client metrics configuration: bar"
        );
        let ok = alter_client_metrics(
            vec![],
            &[
                set("metrics", "org.apache.kafka.producer."),
                set("match", "client_id=a.*"),
            ],
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
    }

    #[test]
    fn every_topic_synonym_names_a_broker_config() {
        for (topic, syns) in TOPIC_SYNONYMS {
            assert!(topics::spec(topic).is_some(), "{topic}");
            for (b, _) in *syns {
                assert!(broker_spec(b).is_some(), "{b}");
            }
        }
        assert!(
            BROKER_CONFIGS.windows(2).all(|w| w[0].name < w[1].name),
            "sorted for binary search"
        );
    }
}
