//! Transaction state in PostgreSQL: one `txn_ids` row per transactional id,
//! the partitions and groups of its open transaction, its pending offsets,
//! the transactions open in each partition and the COMMIT/ABORT markers.
//!
//! Every change is one PostgreSQL transaction that locks the partitions of
//! the open transaction (in key order, as window commits do), then the
//! transactional id's row, and lets the caller decide on what it found
//! ([`Meta::txn_apply`]): Kafka's rules live in the engine, this module
//! only makes each decision atomic. Ending a transaction writes a marker
//! in every partition, moves its offsets to the groups, and moves every
//! partition's last stable offset, in that one transaction.

use std::collections::{HashMap, HashSet};

use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::commit::{locked_from_row, marks_payloads, LockedPartition, PartitionMarks};
use crate::groups::OffsetCommit;
use crate::limits::{TXN_APPLY_ATTEMPTS_MAX, TXN_CONNECTIONS};
use crate::notify::{Notifier, WATERMARKS};
use crate::{sql, Meta, MetaError};

/// Kafka's transaction states (`TransactionState`), by their names in
/// DescribeTransactions and ListTransactions. Only Empty, Ongoing and the
/// Complete states are stored: the Prepare states last one PostgreSQL
/// transaction here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn parse(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A COMMIT or ABORT marker as Fetch serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerRecord {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// A transactional id's stored state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: Vec<u8>,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_id: i64,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// When the open transaction began (ms since the Unix epoch), -1: none.
    pub start_ms: i64,
    pub updated_ms: i64,
    /// The open transaction's partitions, sorted.
    pub partitions: Vec<(Uuid, i32)>,
    /// The open transaction's groups, sorted.
    pub groups: Vec<String>,
}

/// What a transaction change found, with its locks held.
#[derive(Debug)]
pub struct TxnLocked {
    pub txn: Option<TxnRecord>,
    /// A producer id never handed out, when one was asked for.
    pub fresh_producer_id: Option<i64>,
    /// The open transaction's partitions that exist, locked.
    pub partitions: HashMap<(Uuid, i32), LockedPartition>,
    /// Per locked partition, every open transaction there: (producer id,
    /// first offset).
    pub open: HashMap<(Uuid, i32), Vec<(i64, i64)>>,
    /// Now, in ms since the Unix epoch.
    pub now_ms: i64,
}

/// Ends the open transaction: a marker in each of its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnEnd {
    pub commit: bool,
    /// The producer epoch the markers carry (a fence's bumped epoch for
    /// aborts by InitProducerId or timeout).
    pub marker_epoch: i16,
}

/// What to write, decided on a [`TxnLocked`].
#[derive(Clone, Debug)]
pub struct TxnChange {
    /// End the open transaction first (its partitions, groups and offsets
    /// are cleared).
    pub end: Option<TxnEnd>,
    /// The row to store (its `partitions` and `groups` are ignored).
    pub row: TxnRecord,
    /// Partitions and a group to add to the (now) open transaction.
    pub add_partitions: Vec<(Uuid, i32)>,
    pub add_group: Option<String>,
}

/// How a TxnOffsetCommit's transaction was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOffsetCheck {
    Written,
    UnknownTransactionalId,
    /// A different producer id holds the transactional id.
    ProducerIdMismatch,
    /// The producer's epoch is not the current one.
    Fenced,
    /// No open transaction, or its group was not added (AddOffsetsToTxn).
    NotInTransaction,
    /// The group is coordinated under another epoch now (a takeover).
    GroupFenced,
}

/// A producer's state in one partition (DescribeProducers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    /// First offset of its open transaction in the partition, -1: none.
    pub current_txn_start_offset: i64,
}

/// What read_committed fetches of one partition need, from one snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StableState {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
    pub abort_seq: i64,
    /// Aborted transactions with their marker at or after the offset asked
    /// from: (producer id, first offset, marker offset).
    pub aborted: Vec<(i64, i64, i64)>,
    /// The list was cut: aborted transactions beginning at or after this
    /// offset may be missing.
    pub complete_below: Option<i64>,
}

/// The statements of transaction changes, prepared once per connection:
/// each execution is then sent at once, in order, with no Parse round trip
/// of its own — which is what lets BEGIN, the locks, the reads, the writes
/// and COMMIT be pipelined (a statement given as text is parsed first, and
/// its execution would reach PostgreSQL after a COMMIT sent beside it).
macro_rules! txn_statements {
    ($($field:ident => $sql:expr),* $(,)?) => {
        pub(crate) struct TxnStatements {
            $($field: tokio_postgres::Statement,)*
        }

        impl TxnStatements {
            async fn prepare(
                c: &tokio_postgres::Client,
            ) -> Result<TxnStatements, tokio_postgres::Error> {
                Ok(TxnStatements { $($field: c.prepare($sql).await?,)* })
            }
        }
    };
}

txn_statements! {
    lock_partitions => sql::TXN_LOCK_PARTITIONS,
    open_in_partitions => sql::TXN_OPEN_IN_PARTITIONS,
    next_producer_id => sql::NEXT_PRODUCER_ID,
    load => sql::TXN_LOAD,
    insert_markers => sql::TXN_INSERT_MARKERS,
    advance_markers => sql::TXN_ADVANCE_MARKERS,
    close_open => sql::TXN_CLOSE_OPEN,
    apply_offsets => sql::TXN_APPLY_OFFSETS,
    clear => sql::TXN_CLEAR,
    update => sql::TXN_UPDATE,
    insert => sql::TXN_INSERT,
    add_partitions => sql::TXN_ADD_PARTITIONS,
    add_group => sql::TXN_ADD_GROUP,
    offset_check => sql::TXN_OFFSET_CHECK,
    offset_write => sql::TXN_OFFSET_WRITE,
}

/// A connection for transaction changes, with its statements.
pub(crate) struct TxnConn {
    pub(crate) client: tokio_postgres::Client,
    st: TxnStatements,
}

impl TxnConn {
    pub(crate) async fn connect(url: &str) -> Result<TxnConn, MetaError> {
        let client = crate::connect(url).await?;
        let st = TxnStatements::prepare(&client).await?;
        Ok(TxnConn { client, st })
    }
}

/// A listed transaction: (transactional id, producer id, state, start ms).
pub type TxnListing = (Vec<u8>, i64, TxnState, i64);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn record_from_row(r: &tokio_postgres::Row) -> Result<TxnRecord, MetaError> {
    let state: String = r.get(5);
    let topics: Vec<Uuid> = r.get(8);
    let parts: Vec<i32> = r.get(9);
    Ok(TxnRecord {
        transactional_id: r.get(11),
        producer_id: r.get(0),
        producer_epoch: r.get(1),
        last_producer_id: r.get(2),
        last_producer_epoch: r.get(3),
        timeout_ms: r.get(4),
        state: TxnState::parse(&state)
            .ok_or_else(|| MetaError::Invalid(format!("stored transaction state {state:?}")))?,
        start_ms: r.get(6),
        updated_ms: r.get(7),
        partitions: topics.into_iter().zip(parts).collect(),
        groups: r.get(10),
    })
}

/// A unique violation: two agents created the same transactional id at
/// once; the loser retries and finds the row.
fn is_conflict(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

enum Attempt<R> {
    Done(R),
    /// The open transaction gained a partition between its partitions were
    /// locked and its row was: lock again.
    Retry,
}

/// One attempt of [`Meta::txn_apply`] on `c`.
async fn apply_once<R>(
    conn: &TxnConn,
    notifier: &Notifier,
    id: &[u8],
    lock_partitions: bool,
    want_producer_id: bool,
    last_attempt: bool,
    decide: &mut (dyn FnMut(&TxnLocked) -> (R, Option<TxnChange>) + Send),
) -> Result<Attempt<R>, MetaError> {
    let (c, st) = (&conn.client, &conn.st);
    let ids = vec![id.to_vec()];
    let ids_param: [&(dyn ToSql + Sync); 1] = [&ids];
    let lock = async {
        if lock_partitions {
            c.query(&st.lock_partitions, &[&id]).await
        } else {
            Ok(Vec::new())
        }
    };
    let open = async {
        if lock_partitions {
            c.query(&st.open_in_partitions, &[&id]).await
        } else {
            Ok(Vec::new())
        }
    };
    let pid = async {
        if want_producer_id {
            c.query_one(&st.next_producer_id, &[])
                .await
                .map(|r| Some(r.get::<_, i64>(0)))
        } else {
            Ok(None)
        }
    };
    // One round trip: PostgreSQL runs them in order, so the row lock is
    // taken after the partition locks.
    let (begun, locked, row, open, pid) = futures::join!(
        c.batch_execute("BEGIN"),
        lock,
        c.query(&st.load, &ids_param),
        open,
        pid
    );
    begun?;
    let partitions: HashMap<(Uuid, i32), LockedPartition> = locked?
        .iter()
        .map(|r| ((r.get(0), r.get(1)), locked_from_row(r)))
        .collect();
    let txn = match row?.first() {
        Some(r) => Some(record_from_row(r)?),
        None => None,
    };
    let mut open_by_tp: HashMap<(Uuid, i32), Vec<(i64, i64)>> = HashMap::new();
    for r in open? {
        open_by_tp
            .entry((r.get(0), r.get(1)))
            .or_default()
            .push((r.get(2), r.get(3)));
    }
    if lock_partitions && !last_attempt {
        // A partition added between the partition locks and the row lock
        // (another agent's AddPartitionsToTxn for the same id) is not
        // locked: lock again. On the last attempt the partitions still
        // missing are ones deleted since they were added.
        let unlocked = txn
            .as_ref()
            .is_some_and(|t| t.partitions.iter().any(|tp| !partitions.contains_key(tp)));
        if unlocked {
            c.batch_execute("ROLLBACK").await?;
            return Ok(Attempt::Retry);
        }
    }
    let found = TxnLocked {
        txn,
        fresh_producer_id: pid?,
        partitions,
        open: open_by_tp,
        now_ms: now_ms(),
    };
    let (reply, change) = decide(&found);
    let Some(change) = change else {
        c.batch_execute("COMMIT").await?;
        return Ok(Attempt::Done(reply));
    };
    write_change(conn, notifier, id, &found, &change).await?;
    Ok(Attempt::Done(reply))
}

/// One statement of a pipeline, owning its parameter list.
fn exec<'a>(
    c: &'a tokio_postgres::Client,
    statement: &'a tokio_postgres::Statement,
    params: Vec<&'a (dyn ToSql + Sync)>,
) -> futures::future::BoxFuture<'a, Result<u64, tokio_postgres::Error>> {
    Box::pin(async move { c.execute(statement, &params).await })
}

/// The writes of `change` and COMMIT, pipelined in one round trip; then
/// the new marks are announced.
async fn write_change(
    conn: &TxnConn,
    notifier: &Notifier,
    id: &[u8],
    found: &TxnLocked,
    change: &TxnChange,
) -> Result<(), MetaError> {
    let (c, st) = (&conn.client, &conn.st);
    let id = id.to_vec();
    // Owned parameter storage, alive until the pipeline is done.
    struct Markers {
        topics: Vec<Uuid>,
        parts: Vec<i32>,
        offsets: Vec<i64>,
        firsts: Vec<Option<i64>>,
        pins: Vec<Option<i64>>,
        seqs: Vec<i64>,
        pid: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        ts: i64,
        payloads: Vec<String>,
    }
    let markers = match (change.end, &found.txn) {
        (Some(end), Some(txn)) => {
            let mut m = Markers {
                topics: Vec::new(),
                parts: Vec::new(),
                offsets: Vec::new(),
                firsts: Vec::new(),
                pins: Vec::new(),
                seqs: Vec::new(),
                pid: txn.producer_id,
                epoch: end.marker_epoch,
                commit: end.commit,
                coordinator_epoch: 0,
                ts: found.now_ms,
                payloads: Vec::new(),
            };
            let mut news = Vec::new();
            for tp in &txn.partitions {
                let Some(locked) = found.partitions.get(tp) else {
                    continue; // deleted since it was added
                };
                let open = found.open.get(tp).map(Vec::as_slice).unwrap_or(&[]);
                let first = open
                    .iter()
                    .find(|(pid, _)| *pid == txn.producer_id)
                    .map(|o| o.1);
                let pin = open
                    .iter()
                    .filter(|(pid, _)| *pid != txn.producer_id)
                    .map(|o| o.1)
                    .min();
                let aborted = !end.commit && first.is_some();
                let seq = locked.abort_seq + aborted as i64;
                let marker = locked.next_offset;
                m.topics.push(tp.0);
                m.parts.push(tp.1);
                m.offsets.push(marker);
                m.firsts.push(first);
                m.pins.push(pin);
                m.seqs.push(seq);
                let hw = marker + 1;
                news.push((
                    *tp,
                    PartitionMarks {
                        high_watermark: hw,
                        log_start_offset: locked.log_start_offset,
                        last_stable_offset: pin.unwrap_or(hw).min(hw),
                        abort_seq: seq,
                    },
                    first.filter(|_| aborted).map(|f| (txn.producer_id, f)),
                ));
            }
            m.payloads = marks_payloads(None, news.into_iter());
            Some(m)
        }
        _ => None,
    };
    let row = &change.row;
    let state = row.state.name();
    let row_params: [&(dyn ToSql + Sync); 9] = [
        &id,
        &row.producer_id,
        &row.producer_epoch,
        &row.last_producer_id,
        &row.last_producer_epoch,
        &row.timeout_ms,
        &state,
        &row.start_ms,
        &found.now_ms,
    ];
    let (add_topics, add_parts): (Vec<Uuid>, Vec<i32>) =
        change.add_partitions.iter().copied().unzip();
    let mut futures: Vec<futures::future::BoxFuture<'_, Result<u64, tokio_postgres::Error>>> =
        Vec::new();
    if let Some(m) = &markers {
        if !m.offsets.is_empty() {
            futures.push(exec(
                c,
                &st.insert_markers,
                vec![
                    &m.topics,
                    &m.parts,
                    &m.offsets,
                    &m.pid,
                    &m.epoch,
                    &m.commit,
                    &m.coordinator_epoch,
                    &m.ts,
                    &m.firsts,
                ],
            ));
            futures.push(exec(
                c,
                &st.advance_markers,
                vec![&m.topics, &m.parts, &m.offsets, &m.pins, &m.seqs, &m.ts],
            ));
            futures.push(exec(c, &st.close_open, vec![&m.pid, &m.topics, &m.parts]));
        }
        if m.commit {
            futures.push(exec(c, &st.apply_offsets, vec![&id]));
        }
        futures.push(exec(c, &st.clear, vec![&id]));
    }
    futures.push(exec(
        c,
        if found.txn.is_some() {
            &st.update
        } else {
            &st.insert
        },
        row_params.to_vec(),
    ));
    if !add_topics.is_empty() {
        futures.push(exec(
            c,
            &st.add_partitions,
            vec![&id, &add_topics, &add_parts],
        ));
    }
    if let Some(g) = &change.add_group {
        futures.push(exec(c, &st.add_group, vec![&id, g]));
    }
    let (writes, committed) = futures::join!(
        futures::future::join_all(futures),
        c.batch_execute("COMMIT")
    );
    for w in writes {
        w?;
    }
    committed?;
    if let Some(m) = markers {
        notifier.announce(WATERMARKS, m.payloads);
    }
    Ok(())
}

impl Meta {
    /// Runs one transaction change on transactional id `id`: finds its row
    /// (locking the partitions of its open transaction first when
    /// `lock_partitions`, as ending it needs), calls `decide`, writes what
    /// it returns and commits. `want_producer_id` hands `decide` a fresh
    /// producer id (for a new id or a rotation). Requests for one id run on
    /// one connection, in order.
    pub async fn txn_apply<R: Send + 'static>(
        &self,
        id: Vec<u8>,
        lock_partitions: bool,
        want_producer_id: bool,
        mut decide: impl FnMut(&TxnLocked) -> (R, Option<TxnChange>) + Send + 'static,
    ) -> Result<R, MetaError> {
        self.run_ctx(move |ctx| async move {
            let guard = ctx.txn_conn(&id).await?;
            let conn = guard.as_ref().expect("connected by txn_conn");
            let c = &conn.client;
            let mut last = None;
            for attempt in 0..TXN_APPLY_ATTEMPTS_MAX {
                let last_attempt = attempt + 1 == TXN_APPLY_ATTEMPTS_MAX;
                match apply_once(
                    conn,
                    &ctx.notifier,
                    &id,
                    lock_partitions,
                    want_producer_id,
                    last_attempt,
                    &mut decide,
                )
                .await
                {
                    Ok(Attempt::Done(r)) => return Ok(r),
                    Ok(Attempt::Retry) => {}
                    Err(MetaError::Postgres(e)) if is_conflict(&e) => {
                        let _ = c.batch_execute("ROLLBACK").await;
                        last = Some(MetaError::Postgres(e));
                    }
                    Err(e) => {
                        if !c.is_closed() {
                            let _ = c.batch_execute("ROLLBACK").await;
                        }
                        return Err(e);
                    }
                }
            }
            Err(last.unwrap_or_else(|| {
                MetaError::Invalid("transaction kept changing while being ended; retry".into())
            }))
        })
        .await
    }

    /// Transactional ids' stored state (absent ids are left out).
    pub async fn txn_describe(&self, ids: Vec<Vec<u8>>) -> Result<Vec<TxnRecord>, MetaError> {
        self.run(move |c| async move {
            c.query(sql::TXN_DESCRIBE, &[&ids])
                .await?
                .iter()
                .map(record_from_row)
                .collect()
        })
        .await
    }

    /// Transactions in `states` (all: `None`) held by `producer_ids` (all:
    /// `None`), at most `limit`.
    pub async fn txn_list(
        &self,
        states: Option<Vec<String>>,
        producer_ids: Option<Vec<i64>>,
        limit: i64,
    ) -> Result<Vec<TxnListing>, MetaError> {
        self.run(move |c| async move {
            let rows = c
                .query(sql::TXN_LIST, &[&states, &producer_ids, &limit])
                .await?;
            rows.iter()
                .map(|r| {
                    let state: String = r.get(2);
                    Ok((
                        r.get(0),
                        r.get(1),
                        TxnState::parse(&state).ok_or_else(|| {
                            MetaError::Invalid(format!("stored transaction state {state:?}"))
                        })?,
                        r.get(3),
                    ))
                })
                .collect()
        })
        .await
    }

    /// Open transactions past their timeout, oldest first.
    pub async fn txn_timed_out(&self, limit: i64) -> Result<Vec<Vec<u8>>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::TXN_TIMED_OUT, &[&now_ms(), &limit])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
        .await
    }

    /// Forgets up to `limit` transactional ids idle (no open transaction)
    /// for longer than `idle_ms`; returns how many.
    pub async fn txn_expire(&self, idle_ms: i64, limit: i64) -> Result<u64, MetaError> {
        self.run(move |c| async move {
            Ok(c.execute(sql::TXN_EXPIRE, &[&(now_ms() - idle_ms), &limit])
                .await?)
        })
        .await
    }

    /// Writes the offsets of a TxnOffsetCommit as pending in the open
    /// transaction of `id`, if producer `producer_id`/`epoch` holds it and
    /// added `group_id`, and the group is still coordinated under
    /// `group_epoch`. Returns the (topic, partition) pairs written.
    pub async fn txn_commit_offsets(
        &self,
        id: Vec<u8>,
        producer_id: i64,
        producer_epoch: i16,
        group_id: String,
        group_epoch: i64,
        offsets: Vec<OffsetCommit>,
    ) -> Result<(TxnOffsetCheck, Vec<(Uuid, i32)>), MetaError> {
        self.run_ctx(move |ctx| async move {
            let guard = ctx.txn_conn(&id).await?;
            let conn = guard.as_ref().expect("connected by txn_conn");
            let (c, st) = (&conn.client, &conn.st);
            let topics: Vec<Uuid> = offsets.iter().map(|o| o.topic_id).collect();
            let parts: Vec<i32> = offsets.iter().map(|o| o.partition).collect();
            let offs: Vec<i64> = offsets.iter().map(|o| o.offset).collect();
            let epochs: Vec<i32> = offsets.iter().map(|o| o.leader_epoch).collect();
            let meta: Vec<Option<Vec<u8>>> = offsets.iter().map(|o| o.metadata.clone()).collect();
            let params: [&(dyn ToSql + Sync); 10] = [
                &id,
                &group_id,
                &producer_id,
                &producer_epoch,
                &topics,
                &parts,
                &offs,
                &epochs,
                &meta,
                &group_epoch,
            ];
            let check_params: [&(dyn ToSql + Sync); 3] = [&id, &group_id, &group_epoch];
            let (begun, check, written, committed) = futures::join!(
                c.batch_execute("BEGIN"),
                c.query_opt(&st.offset_check, &check_params),
                c.query(&st.offset_write, &params),
                c.batch_execute("COMMIT")
            );
            let result = (|| {
                begun?;
                let check = check?;
                let written = written?;
                committed?;
                Ok::<_, MetaError>((check, written))
            })();
            let (check, written) = match result {
                Ok(r) => r,
                Err(e) => {
                    if !c.is_closed() {
                        let _ = c.batch_execute("ROLLBACK").await;
                    }
                    return Err(e);
                }
            };
            let verdict = match check {
                None => TxnOffsetCheck::UnknownTransactionalId,
                Some(r) => {
                    let (pid, epoch, state, added, coordinated): (i64, i16, String, bool, bool) =
                        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
                    if !coordinated {
                        TxnOffsetCheck::GroupFenced
                    } else if pid != producer_id {
                        TxnOffsetCheck::ProducerIdMismatch
                    } else if epoch != producer_epoch {
                        TxnOffsetCheck::Fenced
                    } else if state != "Ongoing" || !added {
                        TxnOffsetCheck::NotInTransaction
                    } else {
                        TxnOffsetCheck::Written
                    }
                }
            };
            Ok((
                verdict,
                written.iter().map(|r| (r.get(0), r.get(1))).collect(),
            ))
        })
        .await
    }

    /// Partitions (topic name, partition) of `group_id` with offsets pending
    /// in an open transaction.
    pub async fn txn_pending_offsets(
        &self,
        group_id: String,
    ) -> Result<HashSet<(String, i32)>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::TXN_PENDING_OFFSETS, &[&group_id])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect())
        })
        .await
    }

    /// Producers with state in `partitions` of `topic_id`, at most `limit`.
    pub async fn txn_producers(
        &self,
        topic_id: Uuid,
        partitions: Vec<i32>,
        limit: i64,
    ) -> Result<Vec<ActiveProducer>, MetaError> {
        self.run(move |c| async move {
            let rows = c
                .query(sql::TXN_PRODUCERS, &[&topic_id, &partitions, &limit])
                .await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let history: Option<Vec<i64>> = r.get(3);
                    // Flattened (first_seq, last_seq, base_offset) triples,
                    // newest last.
                    let last_sequence = history
                        .as_ref()
                        .and_then(|h| h.chunks_exact(3).last().map(|b| b[1] as i32))
                        .unwrap_or(-1);
                    ActiveProducer {
                        partition: r.get(0),
                        producer_id: r.get(1),
                        producer_epoch: r.get(2),
                        last_sequence,
                        last_timestamp_ms: r.get(4),
                        current_txn_start_offset: r.get(5),
                    }
                })
                .collect())
        })
        .await
    }

    /// What read_committed fetches from `from_offset` need, in one snapshot
    /// (`None`: no such partition); at most `aborted_max` aborted entries.
    pub async fn stable_state(
        &self,
        topic_id: Uuid,
        partition: i32,
        from_offset: i64,
        aborted_max: i64,
    ) -> Result<Option<StableState>, MetaError> {
        self.run(move |c| async move {
            let Some(r) = c
                .query_opt(
                    sql::STABLE_STATE,
                    &[&topic_id, &partition, &from_offset, &aborted_max],
                )
                .await?
            else {
                return Ok(None);
            };
            let pids: Vec<i64> = r.get(4);
            let firsts: Vec<i64> = r.get(5);
            let markers: Vec<i64> = r.get(6);
            let mut aborted: Vec<(i64, i64, i64)> = pids
                .into_iter()
                .zip(firsts)
                .zip(markers)
                .map(|((p, f), m)| (p, f, m))
                .collect();
            let complete_below = if aborted.len() as i64 > aborted_max {
                aborted.pop().map(|(_, first, _)| first)
            } else {
                None
            };
            Ok(Some(StableState {
                high_watermark: r.get(0),
                log_start_offset: r.get(1),
                last_stable_offset: r.get(2),
                abort_seq: r.get(3),
                aborted,
                complete_below,
            }))
        })
        .await
    }
}

/// Which of the transaction connections serves `id` (one id, one
/// connection: its requests run in order).
pub(crate) fn txn_connection_index(id: &[u8]) -> usize {
    // FNV-1a: stable and cheap; any spread will do.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    (h % TXN_CONNECTIONS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip() {
        for s in TxnState::ALL {
            assert_eq!(TxnState::parse(s.name()), Some(s));
        }
        assert_eq!(TxnState::parse("ongoing"), None);
    }

    #[test]
    fn connection_index_is_stable_and_in_range() {
        let a = txn_connection_index(b"flink-0-1");
        assert_eq!(a, txn_connection_index(b"flink-0-1"));
        assert!(a < TXN_CONNECTIONS);
        assert!(txn_connection_index(b"") < TXN_CONNECTIONS);
    }
}
