//! How a group is stored in PostgreSQL ([`StoredGroup`]), for both kinds:
//! each kind fills a [`Stored`] (typed: durations, absent strings) and
//! this module alone turns it into the row and back — the group type's
//! name, the stored state ("Empty" or "Stable"), timeouts in
//! milliseconds. Below, the byte format of a KIP-848 member's
//! subscription and assignment.

use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use rutomq_meta::groups::{StoredGroup, StoredMember};
use uuid::Uuid;

use super::consumer::{Member as ConsumerMember, Partitions};
use super::sets::Keyed;

/// The kinds of group, as `StoredGroup::group_type` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupType {
    /// JoinGroup/SyncGroup.
    Classic,
    /// KIP-848 (ConsumerGroupHeartbeat).
    Consumer,
    /// KIP-932 (ShareGroupHeartbeat).
    Share,
    /// KIP-1071 (StreamsGroupHeartbeat).
    Streams,
}

impl GroupType {
    pub fn name(self) -> &'static str {
        match self {
            GroupType::Classic => "classic",
            GroupType::Consumer => "consumer",
            GroupType::Share => "share",
            GroupType::Streams => "streams",
        }
    }

    /// The kind of a stored group (classic unless it says otherwise).
    pub fn of(stored: &StoredGroup) -> GroupType {
        match stored.group_type.as_str() {
            "consumer" => GroupType::Consumer,
            "share" => GroupType::Share,
            "streams" => GroupType::Streams,
            _ => GroupType::Classic,
        }
    }
}

/// A group as stored, typed.
pub struct Stored {
    pub group_type: GroupType,
    pub group_id: String,
    /// `None` is stored as "".
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The generation (classic) or group epoch (consumer).
    pub generation: i32,
    /// Consumer groups: the epoch of the stored target assignment.
    pub assignment_epoch: i32,
    pub leader_id: Option<String>,
    /// When the group entered its state (ms since the Unix epoch).
    pub state_since_ms: i64,
    pub members: Vec<Member>,
    /// The kind's group-level bytes (a streams group's topology).
    pub data: Vec<u8>,
}

/// A member as stored, typed.
pub struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// The kind's own bytes: the protocol metadata (classic) or
    /// [`encode_subscription`] (consumer).
    pub subscription: Vec<u8>,
    /// The assignment (classic) or [`encode_assignment`] (consumer).
    pub assignment: Vec<u8>,
}

fn timeout_ms(d: Duration) -> i32 {
    d.as_millis() as i32
}

/// A stored timeout; a negative one is zero.
fn timeout(ms: i32) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

impl From<Stored> for StoredGroup {
    fn from(g: Stored) -> StoredGroup {
        StoredGroup {
            group_id: g.group_id,
            group_type: g.group_type.name().into(),
            protocol_type: g.protocol_type.unwrap_or_default(),
            protocol_name: g.protocol_name,
            generation: g.generation,
            assignment_epoch: g.assignment_epoch,
            leader_id: g.leader_id,
            // A rebalance in progress is not stored: a group with members
            // is stored Stable.
            state: if g.members.is_empty() {
                "Empty".into()
            } else {
                "Stable".into()
            },
            state_since_ms: g.state_since_ms,
            data: g.data,
            members: g
                .members
                .into_iter()
                .map(|m| StoredMember {
                    member_id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: timeout_ms(m.session_timeout),
                    rebalance_timeout_ms: timeout_ms(m.rebalance_timeout),
                    subscription: m.subscription,
                    assignment: m.assignment,
                })
                .collect(),
        }
    }
}

impl From<StoredGroup> for Stored {
    fn from(g: StoredGroup) -> Stored {
        Stored {
            group_type: GroupType::of(&g),
            group_id: g.group_id,
            protocol_type: Some(g.protocol_type).filter(|p| !p.is_empty()),
            protocol_name: g.protocol_name,
            generation: g.generation,
            assignment_epoch: g.assignment_epoch,
            leader_id: g.leader_id,
            state_since_ms: g.state_since_ms,
            data: g.data,
            members: g
                .members
                .into_iter()
                .map(|m| Member {
                    member_id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: timeout(m.session_timeout_ms),
                    rebalance_timeout: timeout(m.rebalance_timeout_ms),
                    subscription: m.subscription,
                    assignment: m.assignment,
                })
                .collect(),
        }
    }
}

// A KIP-848 member's state is stored in the groups row's byte arrays,
// version 1.

pub(super) fn put_str(b: &mut BytesMut, s: &str) {
    b.put_u32(s.len() as u32);
    b.put_slice(s.as_bytes());
}

pub(super) fn get_str(b: &mut &[u8]) -> Option<String> {
    if b.remaining() < 4 {
        return None;
    }
    let n = b.get_u32() as usize;
    if b.remaining() < n {
        return None;
    }
    let s = String::from_utf8(b[..n].to_vec()).ok()?;
    b.advance(n);
    Some(s)
}

/// A count, then each item: how every list in the stored formats is
/// written.
pub(super) fn put_list<T>(
    b: &mut BytesMut,
    items: impl IntoIterator<Item = T, IntoIter: ExactSizeIterator>,
    mut put: impl FnMut(&mut BytesMut, T),
) {
    let items = items.into_iter();
    b.put_u32(items.len() as u32);
    for item in items {
        put(b, item);
    }
}

/// A list written by [`put_list`]; `None` when cut short or `get` fails.
pub(super) fn get_list<T>(
    b: &mut &[u8],
    mut get: impl FnMut(&mut &[u8]) -> Option<T>,
) -> Option<Vec<T>> {
    if b.remaining() < 4 {
        return None;
    }
    let n = b.get_u32() as usize;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        out.push(get(b)?);
    }
    Some(out)
}

pub(super) fn get_i16(b: &mut &[u8]) -> Option<i16> {
    (b.remaining() >= 2).then(|| b.get_i16())
}

pub(super) fn get_i32(b: &mut &[u8]) -> Option<i32> {
    (b.remaining() >= 4).then(|| b.get_i32())
}

pub(super) fn put_strs(b: &mut BytesMut, list: &[String]) {
    put_list(b, list, |b, s| put_str(b, s));
}

pub(super) fn get_strs(b: &mut &[u8]) -> Option<Vec<String>> {
    get_list(b, get_str)
}

/// Numbers by key ([`Keyed`]): each key (written by `put_key`) with its
/// list of numbers.
pub(super) fn put_keyed<K>(b: &mut BytesMut, set: &Keyed<K>, put_key: impl Fn(&mut BytesMut, &K)) {
    b.put_u32(set.len() as u32);
    for (k, ps) in set {
        put_key(b, k);
        b.put_u32(ps.len() as u32);
        for &p in ps {
            b.put_i32(p);
        }
    }
}

pub(super) fn get_keyed<K: Ord>(
    b: &mut &[u8],
    mut get_key: impl FnMut(&mut &[u8]) -> Option<K>,
) -> Option<Keyed<K>> {
    let entries = get_list(b, |b| Some((get_key(b)?, get_list(b, get_i32)?)))?;
    Some(
        entries
            .into_iter()
            .map(|(k, ps)| (k, ps.into_iter().collect()))
            .collect(),
    )
}

/// Version 1, then a list of strings: how both kinds' stored member
/// subscriptions begin.
fn put_v1_strs(b: &mut BytesMut, list: &[String]) {
    b.put_u8(1);
    put_strs(b, list);
}

fn get_v1_strs(b: &mut &[u8]) -> Option<Vec<String>> {
    if b.remaining() < 1 || b.get_u8() != 1 {
        return None;
    }
    get_strs(b)
}

pub fn encode_subscription(m: &ConsumerMember) -> Vec<u8> {
    let mut b = BytesMut::new();
    put_v1_strs(&mut b, &m.subscribed);
    put_str(&mut b, m.assignor.as_deref().unwrap_or(""));
    put_str(&mut b, m.rack_id.as_deref().unwrap_or(""));
    put_str(&mut b, m.regex.as_ref().map_or("", |r| r.0.as_str()));
    // Appended fields: a record without them reads as empty.
    let (principal, host) = m.principal.clone().unwrap_or_default();
    put_str(&mut b, &principal);
    put_str(&mut b, &host);
    b.to_vec()
}

/// A stored member's subscription.
#[derive(Debug, Default, PartialEq)]
pub struct StoredSubscription {
    pub topics: Vec<String>,
    pub assignor: Option<String>,
    pub rack: Option<String>,
    pub regex: String,
    /// The principal and host its regex is resolved as (`None` in records
    /// written before they were kept).
    pub principal: Option<(String, String)>,
}

pub fn decode_subscription(mut b: &[u8]) -> StoredSubscription {
    let mut go = || -> Option<_> {
        let topics = get_v1_strs(&mut b)?;
        let assignor = Some(get_str(&mut b)?).filter(|s| !s.is_empty());
        let rack = Some(get_str(&mut b)?).filter(|s| !s.is_empty());
        let regex = get_str(&mut b).unwrap_or_default();
        let principal = get_str(&mut b)
            .filter(|p| !p.is_empty())
            .zip(get_str(&mut b));
        Some(StoredSubscription {
            topics,
            assignor,
            rack,
            regex,
            principal,
        })
    };
    go().unwrap_or_default()
}

/// A share group member's subscription: version 1, topics, rack.
pub fn encode_share_subscription(topics: &[String], rack: Option<&str>) -> Vec<u8> {
    let mut b = BytesMut::new();
    put_v1_strs(&mut b, topics);
    put_str(&mut b, rack.unwrap_or(""));
    b.to_vec()
}

/// (topics, rack) of a stored share group member; nothing when unreadable
/// (it subscribes again on its next heartbeat).
pub fn decode_share_subscription(mut b: &[u8]) -> (Vec<String>, Option<String>) {
    let mut go = || -> Option<_> {
        let topics = get_v1_strs(&mut b)?;
        let rack = Some(get_str(&mut b)?).filter(|s| !s.is_empty());
        Some((topics, rack))
    };
    go().unwrap_or_default()
}

fn put_partitions(b: &mut BytesMut, p: &Partitions) {
    put_keyed(b, p, |b, t| b.put_slice(t.as_bytes()));
}

fn get_partitions(b: &mut &[u8]) -> Option<Partitions> {
    get_keyed(b, |b| {
        let t = Uuid::from_slice(b.get(..16)?).ok()?;
        b.advance(16);
        Some(t)
    })
}

pub fn encode_assignment(m: &ConsumerMember, target: &Partitions) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(1);
    b.put_i32(m.epoch);
    b.put_i32(m.previous_epoch);
    put_partitions(&mut b, &m.assigned);
    put_partitions(&mut b, &m.revoking);
    put_partitions(&mut b, target);
    b.to_vec()
}

/// (epoch, previous epoch, assigned, revoking, target) of a stored member.
pub type StoredAssignment = (i32, i32, Partitions, Partitions, Partitions);

pub fn decode_assignment(mut b: &[u8]) -> Option<StoredAssignment> {
    if b.remaining() < 9 || b.get_u8() != 1 {
        return None;
    }
    let epoch = b.get_i32();
    let previous = b.get_i32();
    Some((
        epoch,
        previous,
        get_partitions(&mut b)?,
        get_partitions(&mut b)?,
        get_partitions(&mut b)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_group_round_trips() {
        let row = StoredGroup {
            group_id: "g".into(),
            group_type: "consumer".into(),
            protocol_type: String::new(),
            protocol_name: Some("range".into()),
            generation: 3,
            assignment_epoch: 2,
            leader_id: None,
            state: "Stable".into(),
            state_since_ms: 1_700_000_000_000,
            data: vec![9],
            members: vec![StoredMember {
                member_id: "m".into(),
                instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: 45_000,
                rebalance_timeout_ms: 30_000,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        };
        let typed = Stored::from(row.clone());
        assert_eq!(typed.group_type, GroupType::Consumer);
        assert_eq!(typed.protocol_type, None);
        assert_eq!(typed.members[0].session_timeout, Duration::from_secs(45));
        assert_eq!(StoredGroup::from(typed), row);
    }

    #[test]
    fn a_group_without_members_is_stored_empty() {
        let g = Stored {
            group_type: GroupType::Classic,
            group_id: "g".into(),
            protocol_type: Some("consumer".into()),
            protocol_name: None,
            generation: 1,
            assignment_epoch: 0,
            leader_id: None,
            state_since_ms: 0,
            data: Vec::new(),
            members: Vec::new(),
        };
        let row = StoredGroup::from(g);
        assert_eq!(row.state, "Empty");
        assert_eq!(row.group_type, "classic");
        assert_eq!(row.protocol_type, "consumer");
    }
}
