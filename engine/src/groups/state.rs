//! A loaded group, of either kind, and what the calls both kinds answer
//! the same way (DescribeGroups, DeleteGroups, OffsetDelete) ask of it.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;
use uuid::Uuid;

use super::classic::{ClassicGroup, State};
use super::consumer::{ConsumerGroup, TopicsView};
use super::share::ShareGroup;
use super::stored::GroupType;
use super::streams::StreamsGroup;
use super::{GroupDescription, MemberDescription};
use crate::coordinator::KeyState;
use crate::error::ErrorCode;

/// The state of one loaded group.
pub(super) struct Group {
    pub group: ClassicGroup,
    /// Set when the group is a KIP-848 consumer group (`group` is then an
    /// unused empty classic group).
    pub consumer: Option<ConsumerGroup>,
    /// Set when the group is a KIP-932 share group (`group` is then an
    /// unused empty classic group).
    pub share: Option<ShareGroup>,
    /// Set when the group is a KIP-1071 streams group (`group` is then an
    /// unused empty classic group).
    pub streams: Option<StreamsGroup>,
}

impl KeyState for Group {
    fn is_idle(&self) -> bool {
        self.empty()
    }

    fn next_wake(&self) -> Option<Instant> {
        if let Some(s) = &self.share {
            return s.next_wake();
        }
        if let Some(s) = &self.streams {
            return s.next_wake();
        }
        match &self.consumer {
            Some(c) => c.next_wake(),
            None => self.group.next_wake(),
        }
    }
}

impl Group {
    /// A classic group (or none yet).
    pub fn is_classic(&self) -> bool {
        self.consumer.is_none() && self.share.is_none() && self.streams.is_none()
    }

    /// No member (of either kind) and nobody waiting.
    pub fn empty(&self) -> bool {
        if let Some(s) = &self.share {
            return s.is_empty();
        }
        if let Some(s) = &self.streams {
            return s.is_empty();
        }
        match &self.consumer {
            Some(c) => c.is_empty(),
            None => self.group.idle(),
        }
    }

    pub fn state_name(&self) -> &'static str {
        if let Some(s) = &self.share {
            return s.state();
        }
        if let Some(s) = &self.streams {
            return s.state();
        }
        match &self.consumer {
            Some(c) => c.state(),
            None => self.group.state.name(),
        }
    }

    pub fn protocol_type(&self) -> String {
        if self.share.is_some() {
            return "share".into();
        }
        if self.streams.is_some() {
            return "streams".into();
        }
        match &self.consumer {
            Some(_) => "consumer".into(),
            None => self.group.protocol_type.clone().unwrap_or_default(),
        }
    }

    pub fn kind(&self) -> &'static str {
        if self.share.is_some() {
            GroupType::Share.name()
        } else if self.streams.is_some() {
            GroupType::Streams.name()
        } else if self.consumer.is_some() {
            GroupType::Consumer.name()
        } else {
            GroupType::Classic.name()
        }
    }

    /// DescribeGroups' answer. `known`: the group exists (stored, or with
    /// members or writes); a loaded consumer group always does.
    pub fn describe(&self, known: bool) -> GroupDescription {
        if let Some(s) = &self.share {
            let members = s
                .members
                .values()
                .map(|m| (&m.member_id, None, &m.client_id, &m.client_host));
            return described(s.state(), "share", super::share::ASSIGNOR, members);
        }
        if let Some(s) = &self.streams {
            let members = s
                .members
                .values()
                .map(|m| (&m.member_id, None, &m.client_id, &m.client_host));
            return described(s.state(), "streams", super::streams::ASSIGNOR, members);
        }
        match &self.consumer {
            Some(c) => {
                let members = c.members.values().map(|m| {
                    (
                        &m.member_id,
                        m.instance_id.as_ref(),
                        &m.client_id,
                        &m.client_host,
                    )
                });
                described(c.state(), "consumer", &c.assignor, members)
            }
            None if known => {
                let g = &self.group;
                let (protocol, members) = g.describe();
                GroupDescription {
                    error: ErrorCode::None,
                    exists: true,
                    state: g.state.name(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    protocol,
                    members,
                }
            }
            None => GroupDescription::error(ErrorCode::None),
        }
    }

    /// Whether DeleteGroups may delete the group.
    pub fn deletable(&self, known: bool) -> Result<(), ErrorCode> {
        if let Some(s) = &self.streams {
            return if s.is_empty() {
                Ok(())
            } else {
                Err(ErrorCode::NonEmptyGroup)
            };
        }
        if let Some(s) = &self.share {
            return if s.is_empty() {
                Ok(())
            } else {
                Err(ErrorCode::NonEmptyGroup)
            };
        }
        match &self.consumer {
            Some(c) if !c.is_empty() => Err(ErrorCode::NonEmptyGroup),
            Some(_) => Ok(()),
            None => {
                let g = &self.group;
                if !known || g.state == State::Dead {
                    Err(ErrorCode::GroupIdNotFound)
                } else if !g.is_empty() || g.state != State::Empty {
                    Err(ErrorCode::NonEmptyGroup)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Whether OffsetDelete may delete offsets of the group: the topics
    /// whose offsets it must keep (the ones consumed now).
    pub fn offsets_deletable(
        &self,
        known: bool,
        topics: &TopicsView,
    ) -> Result<BTreeSet<String>, ErrorCode> {
        if self.share.is_some() {
            // A share group's offsets are its share-partitions'
            // (DeleteShareGroupOffsets).
            return Err(ErrorCode::GroupIdNotFound);
        }
        if let Some(s) = &self.streams {
            return Ok(if s.is_empty() {
                BTreeSet::new()
            } else {
                s.consumed_topics()
            });
        }
        match &self.consumer {
            Some(c) => Ok(c.consumed_topics(topics)),
            None => {
                let g = &self.group;
                if !known || g.state == State::Dead {
                    Err(ErrorCode::GroupIdNotFound)
                } else if g.state != State::Empty && g.protocol_type.as_deref() != Some("consumer")
                {
                    Err(ErrorCode::NonEmptyGroup)
                } else if g.state == State::Empty {
                    Ok(BTreeSet::new())
                } else {
                    Ok(g.subscribed_topics()
                        .unwrap_or_default()
                        .into_iter()
                        .collect())
                }
            }
        }
    }
}

/// DescribeGroups' answer for a group whose members carry no protocol
/// metadata (consumer, share and streams groups): (member id, instance
/// id, client id, client host) of each.
fn described<'a>(
    state: &'static str,
    protocol_type: &str,
    protocol: &str,
    members: impl Iterator<Item = (&'a String, Option<&'a String>, &'a String, &'a String)>,
) -> GroupDescription {
    GroupDescription {
        error: ErrorCode::None,
        exists: true,
        state,
        protocol_type: protocol_type.into(),
        protocol: protocol.into(),
        members: members
            .map(
                |(member_id, instance_id, client_id, client_host)| MemberDescription {
                    member_id: member_id.clone(),
                    instance_id: instance_id.cloned(),
                    client_id: client_id.clone(),
                    client_host: client_host.clone(),
                    metadata: Bytes::new(),
                    assignment: Bytes::new(),
                },
            )
            .collect(),
    }
}

/// OffsetDelete's per-partition answers, and the partitions whose offsets
/// go: a topic the group consumes keeps its offsets.
pub(super) fn split_deletable(
    partitions: Vec<(String, Uuid, i32)>,
    subscribed: &BTreeSet<String>,
) -> (Vec<ErrorCode>, Vec<(Uuid, i32)>) {
    let mut codes = Vec::with_capacity(partitions.len());
    let mut deletable = Vec::new();
    for (topic, id, p) in partitions {
        if subscribed.contains(&topic) {
            codes.push(ErrorCode::GroupSubscribedToTopic);
        } else {
            codes.push(ErrorCode::None);
            deletable.push((id, p));
        }
    }
    (codes, deletable)
}
