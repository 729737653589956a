//! Client quotas, Kafka's model: values stored per entity (a user, a
//! client id, both, or an IP; each named or `<default>`) in PostgreSQL,
//! copied whole into every agent ([`Quotas`]), and enforced per agent by
//! sensors that every shard's connections of one quota entity share
//! ([`sensors`]).
//!
//! Which value applies to a connection is resolved as Kafka resolves it,
//! per quota kind, most specific first: user and client id, user and the
//! default client, the user alone, the default user and the client id,
//! both defaults, the default user alone, the client id alone, the default
//! client alone. The level that matched also says who shares the sensor:
//! a quota set for a user alone is shared by all of that user's clients; a
//! quota for the user and `<default>` client is one per client id.

pub mod admin;
pub mod rate;
pub mod sensors;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rutomq_meta::quota::{EntityPart, QuotaEntity, QuotaValue};

use crate::control::{AgentCopy, ShardCopy};

/// Kafka's quota keys.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Kafka's entity types.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// What a quota limits on a client's connections (the kinds measured per
/// user and client id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Produce request bytes per second.
    Produce,
    /// Fetch response bytes per second.
    Fetch,
    /// Percent of one shard's time spent on the client's requests.
    Request,
    /// Partitions created or deleted per second (CreateTopics,
    /// CreatePartitions, DeleteTopics).
    Mutation,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Produce, Kind::Fetch, Kind::Request, Kind::Mutation];

    pub fn key(self) -> &'static str {
        match self {
            Kind::Produce => PRODUCER_BYTE_RATE,
            Kind::Fetch => CONSUMER_BYTE_RATE,
            Kind::Request => REQUEST_PERCENTAGE,
            Kind::Mutation => CONTROLLER_MUTATION_RATE,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The most one Fetch response holds under a consumer byte rate `bound`:
/// the bound's worth of all but one sample of the window (Kafka's
/// `getMaxValueInQuotaWindow`).
pub fn window_bytes(bound: f64) -> i32 {
    use crate::limits::{QUOTA_SAMPLE_WINDOW_MS, QUOTA_WINDOW_SAMPLES};
    let bytes = bound * (QUOTA_WINDOW_SAMPLES - 1) as f64 * QUOTA_SAMPLE_WINDOW_MS as f64 / 1000.0;
    bytes.clamp(1.0, i32::MAX as f64) as i32
}

/// The quota in force for one connection and kind: the bound (per second)
/// and the sensor's key (user tag, client-id tag), "" for a tag the
/// matched level does not name.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub bound: f64,
    pub user_tag: String,
    pub client_tag: String,
}

/// Every stored quota value, indexed for resolution.
#[derive(Debug, Default)]
pub struct QuotaSet {
    entities: HashMap<QuotaEntity, BTreeMap<String, f64>>,
    /// The connection creation rates of named IPs, by address (`::1` and
    /// `0:0:0:0:0:0:0:1` are one IP).
    ip_rates: HashMap<IpAddr, f64>,
    /// The `<default>` IP's.
    ip_rate_default: Option<f64>,
}

impl QuotaSet {
    pub fn new(values: Vec<QuotaValue>) -> QuotaSet {
        let mut set = QuotaSet::default();
        for v in values {
            if v.key == CONNECTION_CREATION_RATE {
                match &v.entity.ip {
                    EntityPart::Default => set.ip_rate_default = Some(v.value),
                    EntityPart::Named(n) => {
                        if let Ok(ip) = n.parse::<IpAddr>() {
                            set.ip_rates.insert(ip.to_canonical(), v.value);
                        }
                    }
                    EntityPart::Absent => {}
                }
            }
            set.entities
                .entry(v.entity)
                .or_default()
                .insert(v.key, v.value);
        }
        set
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// How many values it holds.
    pub fn values(&self) -> usize {
        self.entities.values().map(BTreeMap::len).sum()
    }

    /// Every entity with its values.
    pub fn entities(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<String, f64>)> {
        self.entities.iter()
    }

    fn value(&self, user: EntityPart, client_id: EntityPart, key: &str) -> Option<f64> {
        let e = QuotaEntity {
            user,
            client_id,
            ip: EntityPart::Absent,
        };
        self.entities.get(&e)?.get(key).copied()
    }

    /// The quota of `kind` for a connection of `user` with `client_id`, or
    /// `None` when no level names one.
    pub fn resolve(&self, kind: Kind, user: &str, client_id: &str) -> Option<Applied> {
        if self.entities.is_empty() {
            return None;
        }
        use EntityPart::{Absent, Default, Named};
        let (u, c) = (|| Named(user.to_owned()), || Named(client_id.to_owned()));
        // (user part, client part, user tag kept, client tag kept)
        let levels = [
            (u(), c(), true, true),
            (u(), Default, true, true),
            (u(), Absent, true, false),
            (Default, c(), true, true),
            (Default, Default, true, true),
            (Default, Absent, true, false),
            (Absent, c(), false, true),
            (Absent, Default, false, true),
        ];
        levels.into_iter().find_map(|(up, cp, ut, ct)| {
            self.value(up, cp, kind.key()).map(|bound| Applied {
                bound,
                user_tag: if ut { user.to_owned() } else { String::new() },
                client_tag: if ct {
                    client_id.to_owned()
                } else {
                    String::new()
                },
            })
        })
    }

    /// The connection creation rate for `ip` (its own, else the default
    /// IP's).
    pub fn connection_rate(&self, ip: IpAddr) -> Option<f64> {
        self.ip_rates
            .get(&ip.to_canonical())
            .copied()
            .or(self.ip_rate_default)
    }
}

/// The agent's copy of the quotas, with the sensors they are enforced by.
pub struct Quotas {
    pub copy: AgentCopy<QuotaSet>,
    pub sensors: sensors::Sensors,
    pub stats: Arc<QuotaStats>,
}

/// What the quotas did, per kind, for `/metrics`.
#[derive(Debug, Default)]
pub struct QuotaStats {
    /// Requests throttled (a response with `throttle_time_ms` set, its
    /// connection muted for it).
    pub throttles: [AtomicU64; Kind::ALL.len()],
    /// Their throttle times.
    pub throttle_ms: [AtomicU64; Kind::ALL.len()],
}

impl QuotaStats {
    pub fn throttled(&self, kind: Kind, ms: u64) {
        self.throttles[kind.index()].fetch_add(1, Relaxed);
        self.throttle_ms[kind.index()].fetch_add(ms, Relaxed);
    }

    pub fn throttles(&self, kind: Kind) -> u64 {
        self.throttles[kind.index()].load(Relaxed)
    }

    pub fn throttle_ms(&self, kind: Kind) -> u64 {
        self.throttle_ms[kind.index()].load(Relaxed)
    }
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            copy: AgentCopy::new(QuotaSet::default()),
            sensors: sensors::Sensors::default(),
            stats: Arc::default(),
        }
    }
}

impl Quotas {
    /// Loads every quota value from PostgreSQL into the copy; the set now
    /// in force. A load cut at `QUOTAS_MAX` keeps the set loaded before.
    pub async fn reload(
        &self,
        meta: &rutomq_meta::Meta,
    ) -> Result<Arc<QuotaSet>, rutomq_meta::MetaError> {
        self.copy
            .reload("client quota values", meta.quota_load(), QuotaSet::new)
            .await
    }
}

/// One shard's view of the quotas.
pub type ShardQuotas = ShardCopy<QuotaSet>;

#[cfg(test)]
mod tests {
    use super::*;

    fn v(user: EntityPart, client_id: EntityPart, key: &str, value: f64) -> QuotaValue {
        QuotaValue {
            entity: QuotaEntity {
                user,
                client_id,
                ip: EntityPart::Absent,
            },
            key: key.into(),
            value,
        }
    }

    #[test]
    fn resolution_follows_kafkas_precedence_and_tags() {
        use EntityPart::{Absent, Default, Named};
        let n = |s: &str| Named(s.into());
        let set = QuotaSet::new(vec![
            v(Absent, Default, PRODUCER_BYTE_RATE, 8.0),
            v(Absent, n("c1"), PRODUCER_BYTE_RATE, 7.0),
            v(Default, Absent, PRODUCER_BYTE_RATE, 6.0),
            v(n("alice"), Absent, PRODUCER_BYTE_RATE, 3.0),
            v(n("alice"), n("c1"), PRODUCER_BYTE_RATE, 1.0),
            v(n("bob"), Default, CONSUMER_BYTE_RATE, 2.0),
        ]);
        let r = |u: &str, c: &str, k| {
            set.resolve(k, u, c)
                .map(|a| (a.bound, a.user_tag, a.client_tag))
        };
        let s = |x: &str| x.to_owned();
        assert_eq!(
            r("alice", "c1", Kind::Produce),
            Some((1.0, s("alice"), s("c1")))
        );
        assert_eq!(
            r("alice", "c2", Kind::Produce),
            Some((3.0, s("alice"), s("")))
        );
        assert_eq!(r("bob", "c1", Kind::Produce), Some((6.0, s("bob"), s(""))));
        assert_eq!(r("bob", "c9", Kind::Fetch), Some((2.0, s("bob"), s("c9"))));
        assert_eq!(r("carol", "c9", Kind::Fetch), None);
        assert_eq!(r("carol", "c9", Kind::Request), None);
        let only_clients = QuotaSet::new(vec![
            v(Absent, Default, PRODUCER_BYTE_RATE, 8.0),
            v(Absent, n("c1"), PRODUCER_BYTE_RATE, 7.0),
        ]);
        let r = |c: &str| {
            only_clients
                .resolve(Kind::Produce, "u", c)
                .map(|a| (a.bound, a.user_tag, a.client_tag))
        };
        assert_eq!(r("c1"), Some((7.0, s(""), s("c1"))));
        assert_eq!(r("c2"), Some((8.0, s(""), s("c2"))));
    }

    #[test]
    fn connection_rate_of_an_ip_or_the_default() {
        let e = |ip: EntityPart| QuotaValue {
            entity: QuotaEntity {
                ip,
                ..QuotaEntity::default()
            },
            key: CONNECTION_CREATION_RATE.into(),
            value: 5.0,
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let set = QuotaSet::new(vec![e(EntityPart::Named("10.0.0.1".into()))]);
        assert_eq!(set.connection_rate(ip("10.0.0.1")), Some(5.0));
        assert_eq!(set.connection_rate(ip("::ffff:10.0.0.1")), Some(5.0));
        assert_eq!(set.connection_rate(ip("10.0.0.2")), None);
        let set = QuotaSet::new(vec![e(EntityPart::Default)]);
        assert_eq!(set.connection_rate(ip("10.0.0.2")), Some(5.0));
        let set = QuotaSet::new(vec![e(EntityPart::Named("0:0:0:0:0:0:0:1".into()))]);
        assert_eq!(set.connection_rate(ip("::1")), Some(5.0));
    }
}
