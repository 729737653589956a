//! What the group coordinator is asked and answers: the calls the
//! [`super::Groups`] handle sends to its thread, their arguments and
//! results, and [`Failed`], the answer of a call no group looked at.

use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;
use rutomq_meta::groups::OffsetCommit;
use uuid::Uuid;

use super::classic::State;
use super::consumer::{self, HeartbeatArgs, HeartbeatResult};
use super::share::{ShareHeartbeatArgs, ShareHeartbeatResult, ShareMember};
use super::streams::{
    StreamsHeartbeatArgs, StreamsHeartbeatResult, StreamsMember, Tasks, Topology,
};
use crate::error::ErrorCode;

pub struct JoinArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

#[derive(Clone, Debug)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug)]
pub struct JoinResult {
    pub error: ErrorCode,
    pub member_id: String,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    /// The members and their metadata, for the leader only.
    pub members: Vec<JoinedMember>,
}

pub struct SyncArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug)]
pub struct SyncResult {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub struct LeaveMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub reason: Option<String>,
}

pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

pub struct GroupDescription {
    pub error: ErrorCode,
    /// False when no such group exists (Kafka describes it as Dead).
    pub exists: bool,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

impl GroupDescription {
    pub(super) fn error(error: ErrorCode) -> GroupDescription {
        GroupDescription {
            error,
            exists: false,
            state: State::Dead.name(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        }
    }
}

pub struct CommitArgs {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    /// -1: a commit from outside group management.
    pub generation: i32,
    /// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for an unknown group.
    pub group_must_exist: bool,
    /// Each (topic, partition) once.
    pub offsets: Vec<OffsetCommit>,
    /// The names of their topics, by id (a streams group checks its
    /// members' commits by topic name).
    pub topic_names: std::collections::HashMap<Uuid, String>,
    /// TxnOffsetCommit: the transaction the offsets are pending in.
    pub txn: Option<TxnTarget>,
}

/// The transaction a TxnOffsetCommit's offsets join.
#[derive(Clone, Debug)]
pub struct TxnTarget {
    pub transactional_id: Vec<u8>,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// A listed group: (group id, protocol type, state, group type).
pub type Listed = (String, String, String, String);

/// The (topic, partition) pairs written by an offset commit.
pub type Written = Result<Vec<(Uuid, i32)>, ErrorCode>;

pub(super) enum Call {
    Join(JoinArgs, oneshot::Sender<JoinResult>),
    Sync(SyncArgs, oneshot::Sender<SyncResult>),
    Heartbeat {
        group_id: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
        reply: oneshot::Sender<ErrorCode>,
    },
    Leave {
        group_id: String,
        members: Vec<LeaveMember>,
        reply: oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
    },
    Commit(CommitArgs, oneshot::Sender<Written>),
    Describe {
        group_id: String,
        reply: oneshot::Sender<GroupDescription>,
    },
    Delete {
        group_id: String,
        reply: oneshot::Sender<ErrorCode>,
    },
    DeleteOffsets {
        group_id: String,
        /// (topic name, topic id, partition)
        partitions: Vec<(String, Uuid, i32)>,
        reply: oneshot::Sender<Result<Vec<ErrorCode>, ErrorCode>>,
    },
    /// KIP-848 heartbeat, with the subscribed topics the handler resolved
    /// (name, id, partitions).
    ConsumerHeartbeat(
        HeartbeatArgs,
        Vec<(String, Uuid, i32)>,
        oneshot::Sender<HeartbeatResult>,
    ),
    ConsumerDescribe {
        group_id: String,
        reply: oneshot::Sender<ConsumerDescription>,
    },
    /// OffsetFetch v9 from a member: is (member, epoch) current?
    ValidateFetch {
        group_id: String,
        member_id: String,
        member_epoch: i32,
        reply: oneshot::Sender<ErrorCode>,
    },
    /// KIP-932 heartbeat, with the subscribed topics the handler resolved.
    ShareHeartbeat(
        ShareHeartbeatArgs,
        Vec<(String, Uuid, i32)>,
        oneshot::Sender<ShareHeartbeatResult>,
    ),
    ShareDescribe {
        group_id: String,
        reply: oneshot::Sender<ShareDescription>,
    },
    /// The share-group offset APIs: is the group an empty share group
    /// (stored, made so when `create` and it does not exist)?
    ShareEmpty {
        group_id: String,
        create: bool,
        reply: oneshot::Sender<ErrorCode>,
    },
    /// KIP-1071 heartbeat, with the topology's topics the handler
    /// resolved.
    StreamsHeartbeat(
        Box<StreamsHeartbeatArgs>,
        Vec<(String, Uuid, i32)>,
        oneshot::Sender<StreamsHeartbeatResult>,
    ),
    StreamsDescribe {
        group_id: String,
        reply: oneshot::Sender<StreamsDescription>,
    },
    /// Load the group if this agent coordinates it (orphan adoption).
    Adopt {
        group_id: String,
    },
}

/// ConsumerGroupDescribe's view of a KIP-848 group.
pub struct ConsumerDescription {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<(consumer::Member, consumer::Partitions)>,
}

impl ConsumerDescription {
    pub(super) fn error(error: ErrorCode, message: Option<String>) -> ConsumerDescription {
        ConsumerDescription {
            error,
            error_message: message,
            state: "Dead",
            group_epoch: -1,
            assignment_epoch: -1,
            assignor: String::new(),
            members: Vec::new(),
        }
    }
}

/// ShareGroupDescribe's view of a share group (and what the share-group
/// offset APIs check: that it is one, and whether it is empty).
pub struct ShareDescription {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: Vec<ShareMember>,
}

impl ShareDescription {
    pub(super) fn error(error: ErrorCode, message: Option<String>) -> ShareDescription {
        ShareDescription {
            error,
            error_message: message,
            state: "Dead",
            group_epoch: -1,
            assignment_epoch: -1,
            members: Vec::new(),
        }
    }
}

/// StreamsGroupDescribe's view of a streams group.
pub struct StreamsDescription {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub topology: Option<Topology>,
    /// The partitions decided for its internal topics, when the topology
    /// runs.
    pub partitions: Option<std::collections::BTreeMap<String, i32>>,
    /// Each member and its target.
    pub members: Vec<(StreamsMember, Tasks)>,
}

impl Failed for StreamsDescription {
    fn failed(error: ErrorCode) -> Self {
        StreamsDescription {
            error,
            error_message: None,
            state: "Dead",
            group_epoch: -1,
            assignment_epoch: -1,
            topology: None,
            partitions: None,
            members: Vec::new(),
        }
    }
}

impl Failed for StreamsHeartbeatResult {
    fn failed(error: ErrorCode) -> Self {
        StreamsHeartbeatResult::error(error, None)
    }
}

impl Failed for ShareDescription {
    fn failed(error: ErrorCode) -> Self {
        ShareDescription::error(error, None)
    }
}

impl Failed for ShareHeartbeatResult {
    fn failed(error: ErrorCode) -> Self {
        ShareHeartbeatResult::error(error, None)
    }
}

impl Call {
    pub(super) fn group_id(&self) -> &str {
        match self {
            Call::Join(a, _) => &a.group_id,
            Call::Sync(a, _) => &a.group_id,
            Call::Commit(a, _) => &a.group_id,
            Call::ConsumerHeartbeat(a, _, _) => &a.group_id,
            Call::ConsumerDescribe { group_id, .. } => group_id,
            Call::ShareHeartbeat(a, _, _) => &a.group_id,
            Call::ShareDescribe { group_id, .. } => group_id,
            Call::ShareEmpty { group_id, .. } => group_id,
            Call::StreamsHeartbeat(a, _, _) => &a.group_id,
            Call::StreamsDescribe { group_id, .. } => group_id,
            Call::ValidateFetch { group_id, .. } => group_id,
            Call::Heartbeat { group_id, .. }
            | Call::Leave { group_id, .. }
            | Call::Describe { group_id, .. }
            | Call::Delete { group_id, .. }
            | Call::DeleteOffsets { group_id, .. }
            | Call::Adopt { group_id } => group_id,
        }
    }

    /// Answers the call with `error` without touching any group.
    pub(super) fn fail(self, error: ErrorCode) {
        fn answer<T: Failed>(reply: oneshot::Sender<T>, error: ErrorCode) {
            let _ = reply.send(T::failed(error));
        }
        match self {
            Call::Join(a, r) => {
                let _ = r.send(JoinResult::error(error, &a.member_id));
            }
            Call::Sync(_, r) => answer(r, error),
            Call::Heartbeat { reply, .. }
            | Call::Delete { reply, .. }
            | Call::ValidateFetch { reply, .. } => answer(reply, error),
            Call::Leave { reply, .. } | Call::DeleteOffsets { reply, .. } => answer(reply, error),
            Call::Commit(_, r) => answer(r, error),
            Call::Describe { reply, .. } => answer(reply, error),
            Call::ConsumerHeartbeat(_, _, r) => answer(r, error),
            Call::ConsumerDescribe { reply, .. } => answer(reply, error),
            Call::ShareHeartbeat(_, _, r) => answer(r, error),
            Call::ShareDescribe { reply, .. } => answer(reply, error),
            Call::ShareEmpty { reply, .. } => answer(reply, error),
            Call::StreamsHeartbeat(_, _, r) => answer(r, error),
            Call::StreamsDescribe { reply, .. } => answer(reply, error),
            Call::Adopt { .. } => {}
        }
    }
}

/// An answer that carries only an error: the call failed before a group
/// looked at it (the coordinator is gone, or the group moved).
pub trait Failed {
    fn failed(error: ErrorCode) -> Self;
}

impl Failed for ErrorCode {
    fn failed(error: ErrorCode) -> Self {
        error
    }
}

impl<T> Failed for Result<T, ErrorCode> {
    fn failed(error: ErrorCode) -> Self {
        Err(error)
    }
}

impl Failed for SyncResult {
    fn failed(error: ErrorCode) -> Self {
        SyncResult::error(error)
    }
}

impl Failed for GroupDescription {
    fn failed(error: ErrorCode) -> Self {
        GroupDescription::error(error)
    }
}

impl Failed for HeartbeatResult {
    fn failed(error: ErrorCode) -> Self {
        HeartbeatResult::error(error, None)
    }
}

impl Failed for ConsumerDescription {
    fn failed(error: ErrorCode) -> Self {
        ConsumerDescription::error(error, None)
    }
}

pub(super) enum Msg {
    Call(Box<Call>),
    List(oneshot::Sender<Result<Vec<Listed>, ErrorCode>>),
    /// Topics that now exist: (name, id, partitions).
    Learned(Vec<(String, Uuid, i32)>),
    Shutdown,
}
