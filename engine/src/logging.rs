//! The agent's log levels, changed at runtime through Kafka's
//! BROKER_LOGGER resource (`kafka-configs --entity-type broker-loggers`).
//!
//! A logger is a `tracing` target named as Kafka names loggers, with dots:
//! `root` (the default level), a crate of the agent (`rutomq`,
//! `rutomq_meta`, ...) or a module path in one (`rutomq.api.produce` for
//! target `rutomq::api::produce`; Kafka's tools allow no `:` in names). Levels are Kafka's (TRACE, DEBUG, INFO, WARN,
//! ERROR, FATAL; FATAL is logged as ERROR). As in Kafka, the levels live
//! in the process only: a restart starts from `RUTOMQ_LOG` again.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::dynamic::Refusal;
use crate::error::ErrorCode;
use crate::topics::AlterOp;

/// Kafka's log levels, as it lists them.
pub const LEVELS: &[&str] = &["DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"];

/// The root logger's name.
pub const ROOT: &str = "root";

/// The crates whose targets are loggers.
const CRATES: &[&str] = &["rutomq", "rutomq_meta", "rutomq_shards", "rutomq_storage"];

/// The loggers listed besides `root` and those given a level: each crate
/// and the agent's main parts.
const LISTED: &[&str] = &[
    "rutomq",
    "rutomq.api",
    "rutomq.compact",
    "rutomq.coordinator",
    "rutomq.dynamic",
    "rutomq.flush",
    "rutomq.gc",
    "rutomq.groups",
    "rutomq.quota",
    "rutomq.read",
    "rutomq.security",
    "rutomq.serve",
    "rutomq.shard",
    "rutomq.txns",
    "rutomq_meta",
    "rutomq_shards",
    "rutomq_storage",
];

/// Installs a new filter (its `tracing_subscriber::EnvFilter` directives).
pub type Apply = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

struct Loggers {
    /// The directives the process started with (`RUTOMQ_LOG`).
    base: Vec<String>,
    /// Levels set at runtime, by logger.
    levels: BTreeMap<String, &'static str>,
    apply: Apply,
}

static LOGGERS: OnceLock<Mutex<Loggers>> = OnceLock::new();

/// Makes the levels changeable: `base` are the directives the filter
/// started with, `apply` installs new ones. Called once, by `main`.
pub fn install(base: &str, apply: Apply) {
    let base = base
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
        .collect();
    let _ = LOGGERS.set(Mutex::new(Loggers {
        base,
        levels: BTreeMap::new(),
        apply,
    }));
}

/// The level `logger` logs at: the most specific directive covering it
/// (a level set at runtime wins over a start directive of the same
/// target), else the root's.
fn level_of(l: &Loggers, logger: &str) -> &'static str {
    let mut targets: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut root = "ERROR"; // EnvFilter's without a default directive
    for d in &l.base {
        match d.split_once('=') {
            None => root = kafka_level(d),
            Some((t, level)) => {
                targets.insert(t.replace("::", "."), kafka_level(level));
            }
        }
    }
    for (t, level) in &l.levels {
        if t == ROOT {
            root = level;
        } else {
            targets.insert(t.clone(), level);
        }
    }
    if logger == ROOT {
        return root;
    }
    targets
        .iter()
        .filter(|(t, _)| logger == t.as_str() || logger.starts_with(&format!("{t}.")))
        .max_by_key(|(t, _)| t.len())
        .map_or(root, |(_, level)| level)
}

fn kafka_level(tracing: &str) -> &'static str {
    match tracing.trim().to_ascii_lowercase().as_str() {
        "trace" => "TRACE",
        "debug" => "DEBUG",
        "info" => "INFO",
        "warn" => "WARN",
        "off" => "OFF",
        _ => "ERROR",
    }
}

fn tracing_level(kafka: &str) -> &'static str {
    match kafka {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        _ => "error",
    }
}

/// Whether `name` is a logger: `root`, a crate of the agent or a module
/// path in one.
fn exists(name: &str) -> bool {
    if name == ROOT {
        return true;
    }
    let mut parts = name.split('.');
    parts.next().is_some_and(|c| CRATES.contains(&c))
        && parts.all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

/// Every logger listed with its level now: `root`, the listed ones and
/// those given a level.
pub fn describe() -> Vec<(String, &'static str)> {
    let started = Loggers {
        base: vec!["info".into()],
        levels: BTreeMap::new(),
        apply: Box::new(|_| Ok(())),
    };
    let guard = LOGGERS
        .get()
        .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
    let l = guard.as_deref().unwrap_or(&started);
    let mut names: Vec<&str> = LISTED
        .iter()
        .copied()
        .chain(l.levels.keys().map(String::as_str))
        .collect();
    names.push(ROOT);
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|n| (n.to_owned(), level_of(l, n)))
        .collect()
}

/// Applies `ops` (SET a logger's level, DELETE it back to what the start
/// directives give it)
/// all or none, refusing as Kafka refuses; `validate_only` checks only.
pub fn alter(ops: &[(&str, AlterOp, Option<&str>)], validate_only: bool) -> Result<(), Refusal> {
    let invalid_config = |m: String| Refusal::new(ErrorCode::InvalidConfig, m);
    let mut set = Vec::with_capacity(ops.len());
    for &(name, op, value) in ops {
        if !exists(name) {
            return Err(invalid_config(format!("Logger {name} does not exist!")));
        }
        match op {
            AlterOp::Set => {
                let v = value.unwrap_or("").trim().to_ascii_uppercase();
                let Some(level) = LEVELS.iter().find(|l| **l == v) else {
                    return Err(invalid_config(format!(
                        "Cannot set the log level of {name} to {} as it is not a supported log level. Valid log levels are {}",
                        value.unwrap_or("null"),
                        LEVELS.join(", ")
                    )));
                };
                set.push((name, Some(*level)));
            }
            AlterOp::Delete if name == ROOT => {
                return Err(Refusal::from(
                    "Removing the log level of the root logger is not allowed".to_owned(),
                ))
            }
            AlterOp::Delete => set.push((name, None)),
            other => {
                return Err(Refusal::from(format!(
                    "{} operation is not allowed for the BROKER_LOGGER resource",
                    format!("{other:?}").to_ascii_uppercase()
                )))
            }
        }
    }
    let Some(loggers) = LOGGERS.get() else {
        return Err(Refusal::from(
            "this process's log levels cannot be changed (its logging was not set up by rutomq's main)".to_owned(),
        ));
    };
    if validate_only {
        return Ok(());
    }
    let mut l = loggers.lock().unwrap_or_else(|p| p.into_inner());
    let before = l.levels.clone();
    for (name, level) in set {
        match level {
            Some(level) => l.levels.insert(name.to_owned(), level),
            None => l.levels.remove(name),
        };
    }
    if l.levels.len() > crate::limits::LOGGERS_MAX {
        l.levels = before;
        return Err(Refusal::new(
            ErrorCode::InvalidConfig,
            format!(
                "at most {} loggers are given a level at runtime",
                crate::limits::LOGGERS_MAX
            ),
        ));
    }
    let directives = directives(&l.base, &l.levels);
    if let Err(e) = (l.apply)(&directives) {
        l.levels = before;
        return Err(Refusal::from(format!("cannot change the log levels: {e}")));
    }
    tracing::info!(%directives, "log levels changed");
    Ok(())
}

/// The filter directives: the start ones, the root level replaced when
/// set, then each logger set at runtime.
fn directives(base: &[String], levels: &BTreeMap<String, &'static str>) -> String {
    let mut out: Vec<String> = base
        .iter()
        .filter(|d| !levels.contains_key(ROOT) || d.contains('='))
        .cloned()
        .collect();
    for (name, level) in levels {
        out.push(if name == ROOT {
            tracing_level(level).to_owned()
        } else {
            format!("{}={}", name.replace('.', "::"), tracing_level(level))
        });
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_keep_the_start_and_add_the_runtime_levels() {
        let base = vec!["info".to_owned(), "rutomq::api=debug".to_owned()];
        let mut levels = BTreeMap::new();
        levels.insert("rutomq.gc".to_owned(), "TRACE");
        assert_eq!(
            directives(&base, &levels),
            "info,rutomq::api=debug,rutomq::gc=trace"
        );
        levels.insert(ROOT.to_owned(), "FATAL");
        assert_eq!(
            directives(&base, &levels),
            "rutomq::api=debug,error,rutomq::gc=trace"
        );
        let l = Loggers {
            base,
            levels,
            apply: Box::new(|_| Ok(())),
        };
        assert_eq!(level_of(&l, "rutomq.api.produce"), "DEBUG");
        assert_eq!(level_of(&l, "rutomq.gc.x"), "TRACE");
        assert_eq!(
            level_of(&l, "rutomq.flush"),
            "FATAL",
            "the root's, set at runtime"
        );
    }

    #[test]
    fn loggers_are_the_agents_targets() {
        assert!(exists("root") && exists("rutomq") && exists("rutomq.api.produce"));
        assert!(!exists("kafka.server.ReplicaManager") && !exists("rutomq.") && !exists("tokio"));
        assert!(!exists("rutomq::api"));
        let err = alter(&[("nope.Logger", AlterOp::Set, Some("DEBUG"))], true).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        let err = alter(&[("rutomq", AlterOp::Set, Some("LOUD"))], true).unwrap_err();
        assert!(err
            .message
            .contains("Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"));
        let err = alter(&[(ROOT, AlterOp::Delete, None)], true).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        let err = alter(&[("rutomq", AlterOp::Append, Some("DEBUG"))], true).unwrap_err();
        assert_eq!(
            err.message,
            "APPEND operation is not allowed for the BROKER_LOGGER resource"
        );
    }
}
