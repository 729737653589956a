//! [`Groups`], the handle shards use to reach the group coordinator's
//! thread.

use std::sync::Arc;

use futures::channel::oneshot;
use rutomq_meta::Meta;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::calls::{Call, Failed, Msg};
use super::consumer::{HeartbeatArgs, HeartbeatResult};
use super::coordinator::Coordinator;
use super::share::{ShareHeartbeatArgs, ShareHeartbeatResult};
use super::streams::{StreamsHeartbeatArgs, StreamsHeartbeatResult};
use super::{
    CommitArgs, ConsumerDescription, GroupDescription, GroupStats, GroupsConfig, JoinArgs,
    JoinResult, LeaveMember, Listed, Owns, ShareDescription, StreamsDescription, SyncArgs,
    SyncResult, Written,
};
use crate::coordinator::start_thread;
use crate::error::ErrorCode;
use crate::limits::GROUP_CALLS_QUEUE_MAX;

/// Handle to the coordinator thread. Cheap to clone; `Send`.
#[derive(Clone)]
pub struct Groups {
    tx: mpsc::Sender<Msg>,
    pub stats: Arc<GroupStats>,
    pub cfg: GroupsConfig,
}

impl Groups {
    pub fn start(
        meta: Meta,
        agent_id: i32,
        owns: Owns,
        cfg: GroupsConfig,
    ) -> std::io::Result<(Groups, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(GROUP_CALLS_QUEUE_MAX);
        let stats = Arc::new(GroupStats::default());
        let thread_stats = stats.clone();
        let thread_cfg = cfg.clone();
        let join = start_thread("groups", "group coordinator", move || {
            let (coordinator, done_rx) =
                Coordinator::new(meta, agent_id, owns, thread_cfg, thread_stats);
            coordinator.run(rx, done_rx)
        })?;
        Ok((Groups { tx, stats, cfg }, join))
    }

    /// Sends a call and waits for its answer; `None` when the coordinator
    /// is gone.
    async fn try_call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Call) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Msg::Call(Box::new(make(tx)))).await.ok()?;
        rx.await.ok()
    }

    /// Sends a call; COORDINATOR_NOT_AVAILABLE when the coordinator is gone.
    async fn call<T: Failed>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Call) -> T {
        self.try_call(make)
            .await
            .unwrap_or_else(|| T::failed(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn join(&self, args: JoinArgs) -> JoinResult {
        let member_id = args.member_id.clone();
        self.try_call(|r| Call::Join(args, r))
            .await
            .unwrap_or_else(|| JoinResult::error(ErrorCode::CoordinatorNotAvailable, &member_id))
    }

    pub async fn sync(&self, args: SyncArgs) -> SyncResult {
        self.call(|r| Call::Sync(args, r)).await
    }

    pub async fn heartbeat(
        &self,
        group_id: String,
        member_id: String,
        instance_id: Option<String>,
        generation: i32,
    ) -> ErrorCode {
        self.call(|reply| Call::Heartbeat {
            group_id,
            member_id,
            instance_id,
            generation,
            reply,
        })
        .await
    }

    pub async fn leave(
        &self,
        group_id: String,
        members: Vec<LeaveMember>,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        self.call(|reply| Call::Leave {
            group_id,
            members,
            reply,
        })
        .await
    }

    pub async fn commit(&self, args: CommitArgs) -> Written {
        self.call(|r| Call::Commit(args, r)).await
    }

    pub async fn describe(&self, group_id: String) -> GroupDescription {
        self.call(|reply| Call::Describe { group_id, reply }).await
    }

    pub async fn delete(&self, group_id: String) -> ErrorCode {
        self.call(|reply| Call::Delete { group_id, reply }).await
    }

    pub async fn delete_offsets(
        &self,
        group_id: String,
        partitions: Vec<(String, Uuid, i32)>,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        self.call(|reply| Call::DeleteOffsets {
            group_id,
            partitions,
            reply,
        })
        .await
    }

    pub async fn consumer_heartbeat(
        &self,
        args: HeartbeatArgs,
        topics: Vec<(String, Uuid, i32)>,
    ) -> HeartbeatResult {
        self.call(|r| Call::ConsumerHeartbeat(args, topics, r))
            .await
    }

    /// OffsetFetch v9 with a member id: whether that member, at that
    /// epoch, may read the group's offsets.
    pub async fn validate_fetch(
        &self,
        group_id: String,
        member_id: String,
        member_epoch: i32,
    ) -> ErrorCode {
        self.call(|reply| Call::ValidateFetch {
            group_id,
            member_id,
            member_epoch,
            reply,
        })
        .await
    }

    pub async fn consumer_describe(&self, group_id: String) -> ConsumerDescription {
        self.call(|reply| Call::ConsumerDescribe { group_id, reply })
            .await
    }

    pub async fn share_heartbeat(
        &self,
        args: ShareHeartbeatArgs,
        topics: Vec<(String, Uuid, i32)>,
    ) -> ShareHeartbeatResult {
        self.call(|r| Call::ShareHeartbeat(args, topics, r)).await
    }

    pub async fn share_describe(&self, group_id: String) -> ShareDescription {
        self.call(|reply| Call::ShareDescribe { group_id, reply })
            .await
    }

    /// Whether `group_id` is an empty share group (made, empty, when
    /// `create` and no group has that id): NONE, NON_EMPTY_GROUP or
    /// GROUP_ID_NOT_FOUND.
    pub async fn share_empty(&self, group_id: String, create: bool) -> ErrorCode {
        self.call(|reply| Call::ShareEmpty {
            group_id,
            create,
            reply,
        })
        .await
    }

    pub async fn streams_heartbeat(
        &self,
        args: StreamsHeartbeatArgs,
        topics: Vec<(String, Uuid, i32)>,
    ) -> StreamsHeartbeatResult {
        self.call(|r| Call::StreamsHeartbeat(Box::new(args), topics, r))
            .await
    }

    pub async fn streams_describe(&self, group_id: String) -> StreamsDescription {
        self.call(|reply| Call::StreamsDescribe { group_id, reply })
            .await
    }

    /// Topics made by this agent (a streams group's internal topics): the
    /// coordinator learns them now rather than at its next refresh.
    pub async fn topics_created(&self, topics: Vec<(String, Uuid, i32)>) {
        let _ = self.tx.send(Msg::Learned(topics)).await;
    }

    /// The groups this agent coordinates.
    pub async fn list(&self) -> Result<Vec<Listed>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::List(tx)).await.is_err() {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        rx.await.unwrap_or(Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// Ends the coordinator: every waiting call gets NOT_COORDINATOR (its
    /// client finds the group's next coordinator).
    /// Call from outside any async runtime: it waits for queue room.
    pub fn shutdown(&self) {
        let _ = self.tx.blocking_send(Msg::Shutdown);
    }
}
