//! What DescribeClientQuotas and AlterClientQuotas ask of the quota model,
//! checked as Kafka's controller checks it (`ClientQuotaControlManager`,
//! `ClientQuotasImage.describe`, Kafka 4.x): entities, the keys each kind
//! of entity takes and their value types, and the describe filter. The
//! messages are Kafka's, so its tools print the same errors.

use std::net::IpAddr;

use rutomq_meta::quota::{EntityPart, QuotaEntity};

use super::{
    CLIENT_ID, CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, IP,
    PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, USER,
};
use crate::error::ErrorCode;

/// A refusal: Kafka's code and message.
pub type Refusal = (ErrorCode, String);

fn invalid(message: String) -> Refusal {
    (ErrorCode::InvalidRequest, message)
}

/// The value type of a quota key (Kafka's `QuotaConfig` definitions).
#[derive(Clone, Copy, Debug, PartialEq)]
enum ValueType {
    Long,
    Int,
    Double,
}

/// The keys an entity of users and client ids takes.
const CLIENT_KEYS: [(&str, ValueType); 4] = [
    (PRODUCER_BYTE_RATE, ValueType::Long),
    (CONSUMER_BYTE_RATE, ValueType::Long),
    (REQUEST_PERCENTAGE, ValueType::Double),
    (CONTROLLER_MUTATION_RATE, ValueType::Double),
];

/// The keys an IP entity takes.
const IP_KEYS: [(&str, ValueType); 1] = [(CONNECTION_CREATION_RATE, ValueType::Int)];

/// One entity as a request names it: (entity type, name; `None` for
/// `<default>`), duplicates collapsed as Kafka's map collapses them (the
/// last one wins), in first-seen order.
pub type WireEntity = Vec<(String, Option<String>)>;

/// Collects a request's entity parts as Kafka's request object does.
pub fn wire_entity<'a>(parts: impl Iterator<Item = (&'a str, Option<&'a str>)>) -> WireEntity {
    let mut out: WireEntity = Vec::new();
    for (t, n) in parts {
        let n = n.map(str::to_owned);
        match out.iter_mut().find(|(have, _)| have == t) {
            Some(slot) => slot.1 = n,
            None => out.push((t.to_owned(), n)),
        }
    }
    out
}

/// Kafka's text for an entity (`ClientQuotaEntity.toString`; its map
/// prints `user` before `client-id`).
pub fn entity_text(e: &WireEntity) -> String {
    let mut parts: Vec<&(String, Option<String>)> = e.iter().collect();
    parts.sort_by_key(|(t, _)| match t.as_str() {
        USER => 0,
        CLIENT_ID => 1,
        IP => 2,
        _ => 3,
    });
    let body: Vec<String> = parts
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", body.join(", "))
}

/// The stored entity a request's entity names, or Kafka's refusal.
pub fn parse_entity(e: &WireEntity) -> Result<QuotaEntity, Refusal> {
    if e.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    let mut entity = QuotaEntity::default();
    for (t, name) in e {
        let part = match name {
            None => EntityPart::Default,
            Some(n) if n.is_empty() => return Err(invalid(format!("Empty {t} not supported"))),
            Some(n) => EntityPart::Named(n.clone()),
        };
        let slot = match t.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => {
                // Kafka resolves host names here; an agent does not resolve
                // names on a request path, and a quota is matched against
                // the address a connection comes from: IP literals only.
                if let EntityPart::Named(n) = &part {
                    if n.parse::<IpAddr>().is_err() {
                        return Err(invalid(format!(
                            "{n} is not a valid IP or resolvable host."
                        )));
                    }
                }
                &mut entity.ip
            }
            other => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {other}"
                )))
            }
        };
        *slot = part;
    }
    let with_ip = !entity.ip.is_absent();
    if with_ip && (!entity.user.is_absent() || !entity.client_id.is_absent()) {
        return Err(invalid(
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                .into(),
        ));
    }
    Ok(entity)
}

/// Checks that `entity` takes `key` and that `value` fits its type.
pub fn check_value(entity: &QuotaEntity, key: &str, value: f64) -> Result<(), Refusal> {
    let keys: &[(&str, ValueType)] = if entity.ip.is_absent() {
        &CLIENT_KEYS
    } else {
        &IP_KEYS
    };
    let Some(&(_, ty)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (max, name) = match ty {
        ValueType::Double => return Ok(()),
        ValueType::Int => (i32::MAX as f64, "an INT"),
        ValueType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {name}."
        )));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

/// How a describe filter component matches an entity part.
#[derive(Clone, Debug, PartialEq)]
enum Match {
    Exact(String),
    Default,
    Any,
}

/// A DescribeClientQuotas filter.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaFilter {
    components: Vec<(String, Match)>,
    strict: bool,
}

impl QuotaFilter {
    /// The filter of a request's components (entity type, match type,
    /// match string), or Kafka's refusal.
    pub fn parse<'a>(
        components: impl Iterator<Item = (&'a str, i8, Option<&'a str>)>,
        strict: bool,
    ) -> Result<QuotaFilter, Refusal> {
        let mut out: Vec<(String, Match)> = Vec::new();
        for (t, match_type, s) in components {
            if t.is_empty() {
                return Err(invalid("Invalid empty entity type.".into()));
            }
            if out.iter().any(|(have, _)| have == t) {
                return Err(invalid(format!(
                    "Entity type {t} cannot appear more than once in the filter."
                )));
            }
            if ![USER, CLIENT_ID, IP].contains(&t) {
                return Err((
                    ErrorCode::UnsupportedVersion,
                    format!("Unsupported entity type {t}"),
                ));
            }
            let m = match (match_type, s) {
                (0, Some(s)) => Match::Exact(s.to_owned()),
                (0, None) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    ))
                }
                (1, None) => Match::Default,
                (1, Some(_)) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    ))
                }
                (2, None) => Match::Any,
                (2, Some(_)) => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )),
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            };
            out.push((t.to_owned(), m));
        }
        let has = |t: &str| out.iter().any(|(have, _)| have == t);
        if has(IP) && (has(USER) || has(CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
                    .into(),
            ));
        }
        Ok(QuotaFilter {
            components: out,
            strict,
        })
    }

    /// Whether `e` matches: every component matches its part (an absent
    /// part matches none); strict, `e` names no other part.
    pub fn matches(&self, e: &QuotaEntity) -> bool {
        let part = |t: &str| match t {
            USER => &e.user,
            CLIENT_ID => &e.client_id,
            _ => &e.ip,
        };
        let each = self.components.iter().all(|(t, m)| match (m, part(t)) {
            (_, EntityPart::Absent) => false,
            (Match::Any, _) => true,
            (Match::Default, p) => *p == EntityPart::Default,
            (Match::Exact(s), EntityPart::Named(n)) => n == s,
            (Match::Exact(_), EntityPart::Default) => false,
        });
        let named = [&e.user, &e.client_id, &e.ip]
            .iter()
            .filter(|p| !p.is_absent())
            .count();
        each && (!self.strict || named == self.components.len())
    }
}

/// An entity's parts as DescribeClientQuotas and AlterClientQuotas answer
/// them: (entity type, name; `None` for `<default>`).
pub fn entity_parts(e: &QuotaEntity) -> Vec<(&'static str, Option<&str>)> {
    [(USER, &e.user), (CLIENT_ID, &e.client_id), (IP, &e.ip)]
        .into_iter()
        .filter_map(|(t, p)| match p {
            EntityPart::Absent => None,
            EntityPart::Default => Some((t, None)),
            EntityPart::Named(n) => Some((t, Some(n.as_str()))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(parts: &[(&str, Option<&str>)]) -> WireEntity {
        wire_entity(parts.iter().copied())
    }

    #[test]
    fn entities_are_checked_as_kafka_checks_them() {
        let e = parse_entity(&w(&[("user", Some("alice")), ("client-id", None)])).unwrap();
        assert_eq!(e.user, EntityPart::Named("alice".into()));
        assert_eq!(e.client_id, EntityPart::Default);
        assert!(e.ip.is_absent());
        let msg = |parts: &[(&str, Option<&str>)]| parse_entity(&w(parts)).unwrap_err().1;
        assert_eq!(msg(&[]), "Invalid empty client quota entity");
        assert_eq!(msg(&[("user", Some(""))]), "Empty user not supported");
        assert_eq!(
            msg(&[("topic", Some("t"))]),
            "Unhandled client quota entity type: topic"
        );
        assert_eq!(
            msg(&[("ip", Some("not-an-ip"))]),
            "not-an-ip is not a valid IP or resolvable host."
        );
        assert!(msg(&[("ip", None), ("user", Some("a"))])
            .starts_with("Invalid quota entity combination"));
        assert!(parse_entity(&w(&[("ip", Some("::1"))])).is_ok());
        // A type named twice: the last one wins (Kafka's map).
        let e = parse_entity(&w(&[("user", Some("a")), ("user", Some("b"))])).unwrap();
        assert_eq!(e.user, EntityPart::Named("b".into()));
        assert_eq!(
            entity_text(&w(&[("client-id", Some("c")), ("user", Some("u"))])),
            "ClientQuotaEntity(entries={user=u, client-id=c})"
        );
    }

    #[test]
    fn values_are_checked_by_key_type() {
        let user = parse_entity(&w(&[("user", Some("u"))])).unwrap();
        let ip = parse_entity(&w(&[("ip", None)])).unwrap();
        let msg = |e: &QuotaEntity, k: &str, v: f64| check_value(e, k, v).err().map(|r| r.1);
        assert_eq!(msg(&user, PRODUCER_BYTE_RATE, 1024.0), None);
        assert_eq!(msg(&user, REQUEST_PERCENTAGE, 12.5), None);
        assert_eq!(
            msg(&user, PRODUCER_BYTE_RATE, 0.5).unwrap(),
            "producer_byte_rate cannot be a fractional value."
        );
        assert_eq!(
            msg(&user, CONSUMER_BYTE_RATE, 0.0).unwrap(),
            "Quota consumer_byte_rate must be greater than 0"
        );
        assert_eq!(
            msg(&user, CONNECTION_CREATION_RATE, 1.0).unwrap(),
            "Invalid configuration key connection_creation_rate"
        );
        assert_eq!(
            msg(&ip, CONNECTION_CREATION_RATE, 3e9).unwrap(),
            "Proposed value for connection_creation_rate is too large for an INT."
        );
        assert_eq!(msg(&ip, CONNECTION_CREATION_RATE, 10.0), None);
        assert_eq!(
            msg(&user, PRODUCER_BYTE_RATE, 1e19).unwrap(),
            "Proposed value for producer_byte_rate is too large for a LONG."
        );
    }

    #[test]
    fn filters_match_as_kafka_matches() {
        use EntityPart::{Absent, Default, Named};
        let e = |user, client_id| QuotaEntity {
            user,
            client_id,
            ip: Absent,
        };
        let n = |s: &str| Named(s.into());
        let f = |c: &[(&str, i8, Option<&str>)], strict| {
            QuotaFilter::parse(c.iter().copied(), strict).unwrap()
        };
        let alice_c1 = e(n("alice"), n("c1"));
        let alice = e(n("alice"), Absent);
        let default_user = e(Default, Absent);
        let any_user = f(&[("user", 2, None)], false);
        assert!(any_user.matches(&alice_c1));
        assert!(any_user.matches(&default_user));
        assert!(!any_user.matches(&e(Absent, n("c1"))));
        let strict_any = f(&[("user", 2, None)], true);
        assert!(!strict_any.matches(&alice_c1));
        assert!(strict_any.matches(&alice));
        assert!(f(&[("user", 1, None)], false).matches(&default_user));
        assert!(!f(&[("user", 0, Some("alice"))], false).matches(&default_user));
        assert!(f(&[], false).matches(&alice));
        assert!(!f(&[], true).matches(&alice));
        let refused = |c: &[(&str, i8, Option<&str>)]| {
            QuotaFilter::parse(c.iter().copied(), false).unwrap_err()
        };
        assert_eq!(
            refused(&[("topic", 2, None)]).0,
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(
            refused(&[("user", 2, None), ("user", 1, None)]).1,
            "Entity type user cannot appear more than once in the filter."
        );
        assert_eq!(
            refused(&[("user", 0, None)]).1,
            "Request specified MATCH_TYPE_EXACT, but set match string to null."
        );
        assert_eq!(refused(&[("user", 7, None)]).1, "Unknown match type 7");
        assert!(refused(&[("ip", 2, None), ("user", 2, None)])
            .1
            .starts_with("Invalid entity filter component combination"));
    }
}
