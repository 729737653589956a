//! Quota enforcement around the handlers, Kafka's way (KIP-219): a client
//! over a quota gets its response with `throttle_time_ms` set, and its
//! connection is muted for that long (its next request waits before it is
//! handled), so a client that ignores the field is held to the quota too.
//!
//! What each kind records: Produce its request bytes (when the request
//! arrives: the records are still appended), Fetch its response bytes
//! (a Fetch that would go over is answered empty instead, and its bytes are
//! taken back, as Kafka does), and every request the time its handler
//! spends on the shard (polled time, not waits), as a percentage of one
//! shard's time. The SASL requests and ApiVersions before authentication
//! are not throttled (their principal is not known yet).

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;

// The generated types of these (newer versions than kafka-protocol has)
// shadow the library's.
use super::generated::{
    DescribeLogDirsResponse, ListOffsetsResponse, OffsetCommitResponse, OffsetFetchResponse,
    StreamsGroupDescribeResponse, StreamsGroupHeartbeatResponse,
};

use super::{Connection, Req};
use crate::error::ErrorCode;
use crate::limits::{QUOTA_THROTTLE_MS_MAX, QUOTA_TIME_THROTTLE_MS_MAX};
use crate::quota::sensors::{ClientQuota, Sensor};
use crate::quota::Kind;
use crate::shard::Shard;

/// A response type's `throttle_time_ms`, where it has one.
pub trait Throttled {
    fn set_throttle_time_ms(&mut self, ms: i32);
}

macro_rules! throttled {
    ($($t:ident),* $(,)?) => {
        $(impl Throttled for $t {
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
        })*
    };
}

macro_rules! unthrottled {
    ($($t:ident),* $(,)?) => {
        $(impl Throttled for $t {
            fn set_throttle_time_ms(&mut self, _: i32) {}
        })*
    };
}

throttled!(
    ProduceResponse,
    FetchResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
    DescribeTopicPartitionsResponse,
    MetadataResponse,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    InitProducerIdResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
    AlterConfigsResponse,
    ListConfigResourcesResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
    CreateDelegationTokenResponse,
    RenewDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    DescribeDelegationTokenResponse,
    DescribeLogDirsResponse,
    AlterReplicaLogDirsResponse,
    ElectLeadersResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    CreatePartitionsResponse,
    DescribeClusterResponse,
    UpdateFeaturesResponse,
    DeleteRecordsResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
    DeleteGroupsResponse,
    OffsetDeleteResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
    StreamsGroupHeartbeatResponse,
    StreamsGroupDescribeResponse,
    ShareGroupDescribeResponse,
    ShareFetchResponse,
    ShareAcknowledgeResponse,
    DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    TxnOffsetCommitResponse,
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    DescribeUserScramCredentialsResponse,
    AlterUserScramCredentialsResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
);

unthrottled!(
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
    WriteTxnMarkersResponse,
    DescribeQuorumResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    WriteShareGroupStateResponse,
    DeleteShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse,
);

/// The quotas in force for a request's connection, resolved once per
/// connection, client id and quota set; `None` when none applies (no
/// measuring at all then) or before authentication. Per request it costs
/// an atomic load and a string compare (the set is borrowed in place, not
/// cloned).
pub fn client_quota(shard: &Shard, conn: &Connection, client_id: &str) -> Option<Rc<ClientQuota>> {
    let quotas = &shard.agent.quotas;
    shard.quotas.with_version(&quotas.copy, |set, version| {
        if set.is_empty() {
            return None;
        }
        if let Some(q) = conn.quota.borrow().as_ref() {
            if q.version == version && q.client_id == client_id {
                return (!q.is_empty()).then(|| q.clone());
            }
        }
        let principal = conn.auth.borrow().principal()?.to_owned();
        // Kafka's user entity is the principal's name, whatever its type.
        let user = principal
            .split_once(':')
            .map_or(principal.as_str(), |(_, n)| n);
        let mut q = ClientQuota {
            version,
            client_id: client_id.to_owned(),
            applied: Default::default(),
            stats: quotas.stats.clone(),
        };
        for kind in Kind::ALL {
            q.applied[kind.index()] = set.resolve(kind, user, client_id).map(|a| {
                (
                    quotas.sensors.get(kind, &a.user_tag, &a.client_tag),
                    a.bound,
                )
            });
        }
        let q = Rc::new(q);
        *conn.quota.borrow_mut() = Some(q.clone());
        (!q.is_empty()).then_some(q)
    })
}

/// A request's throttle time so far, shared with a response that is
/// finished after its handler returned (Produce, Fetch). Only a request a
/// quota applies to has one (no allocation for the others: nothing else
/// throttles).
#[derive(Clone, Debug, Default)]
pub struct ThrottleTime(Option<Rc<Cell<u64>>>);

impl ThrottleTime {
    /// The throttle time of a request with quotas (`active`) or without.
    pub fn new(active: bool) -> ThrottleTime {
        ThrottleTime(active.then(Rc::default))
    }

    /// Raises it to `ms` (the response carries the largest of its quotas').
    fn raise(&self, ms: u64) {
        if let Some(cell) = &self.0 {
            cell.set(cell.get().max(ms));
        }
    }

    /// Milliseconds so far, as the response field holds them.
    pub fn response_ms(&self) -> i32 {
        self.0
            .as_ref()
            .map_or(0, |c| c.get().min(i32::MAX as u64) as i32)
    }

    pub fn is_throttled(&self) -> bool {
        self.response_ms() > 0
    }
}

/// Runs a request's handler `fut`; with a request quota, the shard time
/// it takes is recorded against it and the request throttled when over.
pub async fn request_quota<F: Future>(req: &Req, fut: F) -> F::Output {
    let Some(q) = req.quota.as_ref().filter(|q| q.of(Kind::Request).is_some()) else {
        return fut.await;
    };
    let (out, busy) = timed(fut).await;
    throttle(req, Kind::Request, record_request_time(q, busy));
    out
}

/// Runs `fut`, measuring the time spent polling it.
pub async fn timed<F: Future>(fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut busy = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let t = Instant::now();
        let r = fut.as_mut().poll(cx);
        busy += t.elapsed();
        r
    })
    .await;
    (out, busy)
}

/// Records `busy` shard time against the request quota of `quota`: the
/// throttle time it earns (0 within the quota or without one).
pub fn record_request_time(quota: &ClientQuota, busy: Duration) -> u64 {
    let Some((sensor, bound)) = quota.of(Kind::Request) else {
        return 0;
    };
    // Kafka's unit: percent of one thread's second.
    let percent = busy.as_nanos() as f64 * 100.0 / 1e9;
    sensor.record(percent, *bound, QUOTA_TIME_THROTTLE_MS_MAX)
}

/// The sensor and bound of `kind` for a request, when a quota applies.
pub fn sensor(req: &Req, kind: Kind) -> Option<(Arc<Sensor>, f64)> {
    req.quota.as_ref()?.of(kind).cloned()
}

/// Records the request's throttle `ms` for `kind` (the response carries
/// the largest) and mutes its connection for it.
pub fn throttle(req: &Req, kind: Kind, ms: u64) {
    apply(
        req.quota.as_deref(),
        req.conn.as_ref(),
        &req.throttle_ms,
        kind,
        ms,
    );
}

/// [`throttle`] for a response finished after its request's handler
/// returned (a Fetch's).
pub fn apply(
    quota: Option<&ClientQuota>,
    conn: Option<&Rc<Connection>>,
    throttle_ms: &ThrottleTime,
    kind: Kind,
    ms: u64,
) {
    if ms == 0 {
        return;
    }
    if let Some(q) = quota {
        q.stats.throttled(kind, ms);
    }
    throttle_ms.raise(ms);
    if let Some(conn) = conn {
        conn.mute_for(Duration::from_millis(ms));
    }
}

/// The controller mutation quota of one CreateTopics, CreatePartitions or
/// DeleteTopics request (KIP-599): partitions created or deleted count
/// against `controller_mutation_rate`. From the versions Kafka makes it
/// strict, a topic is refused (THROTTLING_QUOTA_EXCEEDED) once the quota is
/// exceeded and the request throttled for what is owed; older versions
/// (permissive) are never refused, only throttled.
pub struct Mutations<'a> {
    req: &'a Req,
    strict: bool,
    throttle_ms: u64,
}

impl<'a> Mutations<'a> {
    pub fn new(req: &'a Req, strict: bool) -> Mutations<'a> {
        Mutations {
            req,
            strict,
            throttle_ms: 0,
        }
    }

    /// Whether a controller mutation quota applies (else counting is
    /// skipped, and so is any lookup made only to count).
    pub fn applies(&self) -> bool {
        self.req
            .quota
            .as_ref()
            .is_some_and(|q| q.of(Kind::Mutation).is_some())
    }

    /// Counts `partitions` mutations: `Err` when the topic is refused
    /// (Kafka answers it without a message).
    pub fn admit(&mut self, partitions: i32) -> Result<(), ErrorCode> {
        let Some((sensor, bound)) = sensor(self.req, Kind::Mutation) else {
            return Ok(());
        };
        let permits = f64::from(partitions.max(0));
        if !self.strict {
            self.throttle_ms = sensor.record(permits, bound, QUOTA_THROTTLE_MS_MAX);
            return Ok(());
        }
        sensor
            .record_strict(permits, bound, QUOTA_THROTTLE_MS_MAX)
            .map_err(|owed| {
                self.throttle_ms = self.throttle_ms.max(owed);
                ErrorCode::ThrottlingQuotaExceeded
            })
    }
}

impl Drop for Mutations<'_> {
    /// The request's throttle for what it mutated (or was refused).
    fn drop(&mut self) {
        throttle(self.req, Kind::Mutation, self.throttle_ms);
    }
}
