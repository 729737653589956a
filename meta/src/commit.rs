//! The window commit: one PostgreSQL transaction allocates offsets for every
//! batch of one or more uploaded objects, checks producer sequences (and,
//! for transactional batches, that the transaction is open on the
//! partition), inserts the spans and advances the high watermarks and last
//! stable offsets.
//!
//! [`plan`] is the pure part (offsets, sequence checks, span building) so it
//! can be tested without a database; [`execute`] runs it inside a transaction.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::limits::SPAN_BYTES_MAX;
use crate::producer::{last_seq, BatchSeq, ProducerState, SeqCheck};
use crate::{sql, MetaError};

/// The idempotence fields of a batch (producer id >= 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// The batch belongs to a transaction (attribute bit 4).
    pub transactional: bool,
}

/// One validated record batch inside an uploaded object.
#[derive(Clone, Debug)]
pub struct BatchRef {
    pub byte_start: u64,
    pub byte_len: u32,
    /// `lastOffsetDelta + 1`.
    pub offset_count: u32,
    pub max_timestamp: i64,
    pub producer: Option<ProducerFields>,
}

/// The batches of one partition in one object, in append order.
#[derive(Clone, Debug)]
pub struct PartitionAppend {
    pub topic_id: Uuid,
    pub partition: i32,
    pub batches: Vec<BatchRef>,
}

/// One uploaded object and what it holds.
#[derive(Clone, Debug)]
pub struct ObjectCommit {
    pub object_key: String,
    pub size_bytes: u64,
    pub agent_id: i32,
    pub appends: Vec<PartitionAppend>,
    /// Past this instant the commit is refused ([`crate::MetaError::Expired`]):
    /// the orphan collector may delete uncommitted objects older than its
    /// grace period, which is longer.
    pub commit_deadline: std::time::Instant,
}

/// What happened to one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOutcome {
    Appended {
        base_offset: i64,
    },
    Duplicate {
        base_offset: i64,
    },
    UnknownTopicOrPartition,
    OutOfOrderSequence,
    InvalidProducerEpoch,
    /// Transactional batch of a producer id no transactional id holds.
    InvalidProducerIdMapping,
    /// Transactional batch for a partition not in an open transaction.
    InvalidTxnState,
    /// Non-transactional batch of a producer id with a transaction open in
    /// the partition (Kafka: INVALID_TXN_STATE at every version).
    PlainBatchInTransaction,
}

/// A partition's offsets after a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionMarks {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Below the first offset of every open transaction, at most the high
    /// watermark.
    pub last_stable_offset: i64,
    /// Aborts with data in the partition so far (see `partitions.abort_seq`).
    pub abort_seq: i64,
}

/// A locked partition row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockedPartition {
    pub next_offset: i64,
    pub log_start_offset: i64,
    pub lso_pin: Option<i64>,
    pub abort_seq: i64,
}

impl LockedPartition {
    pub fn marks(&self, next_offset: i64, pin: Option<i64>) -> PartitionMarks {
        let pin = match (self.lso_pin, pin) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        PartitionMarks {
            high_watermark: next_offset,
            log_start_offset: self.log_start_offset,
            last_stable_offset: pin.unwrap_or(next_offset).min(next_offset),
            abort_seq: self.abort_seq,
        }
    }
}

/// What the window commit knows of a transactional producer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnGate {
    pub producer_epoch: i16,
    pub ongoing: bool,
    pub partitions: HashSet<(Uuid, i32)>,
}

/// Per object, per append, per batch outcome; plus the new watermarks.
#[derive(Clone, Debug, Default)]
pub struct CommitResult {
    pub outcomes: Vec<Vec<Vec<BatchOutcome>>>,
    /// The offsets of every partition touched, after the commit.
    pub watermarks: HashMap<(Uuid, i32), PartitionMarks>,
    /// The spans inserted, for the agent's own span caches.
    pub spans: Vec<SpanRow>,
    /// Announcements of the new watermarks, to send once committed.
    pub notices: Vec<String>,
}

/// A span row to insert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanRow {
    pub topic_id: Uuid,
    pub partition: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub object_key: String,
    pub byte_start: i64,
    pub byte_len: i32,
    pub batch_count: i32,
    pub max_timestamp: i64,
}

impl SpanRow {
    /// The span as a reader sees it, in an object of `object_size` bytes.
    pub fn into_record(self, object_size: u64) -> crate::SpanRecord {
        crate::SpanRecord {
            base_offset: self.base_offset,
            last_offset: self.last_offset,
            object_key: self.object_key,
            byte_start: self.byte_start as u64,
            byte_len: self.byte_len as u32,
            batch_count: self.batch_count,
            max_timestamp: self.max_timestamp,
            object_size,
            sparse: false,
            marker: None,
        }
    }
}

/// Everything the transaction must write.
#[derive(Debug, Default)]
pub struct Plan {
    pub result: CommitResult,
    pub spans: Vec<SpanRow>,
    /// (topic, partition) → (next offset, max timestamp, bytes appended) for
    /// touched partitions.
    pub advanced: HashMap<(Uuid, i32), (i64, i64, i64)>,
    pub producer_updates: HashMap<(i64, Uuid, i32), ProducerState>,
    /// Transactions opened in a partition by this commit: (topic,
    /// partition, producer id) → first offset.
    pub opened: HashMap<(Uuid, i32, i64), i64>,
    /// Per partition, the smallest of those first offsets (the last stable
    /// offset stays at or below it).
    pub pins: HashMap<(Uuid, i32), i64>,
}

/// The transactional state a commit checks batches against.
#[derive(Debug, Default)]
pub struct TxnView {
    pub gates: HashMap<i64, TxnGate>,
    /// (producer id, topic, partition) → first offset of its open transaction.
    pub open: HashMap<(i64, Uuid, i32), i64>,
}

/// Assigns offsets in object order, then append order, then batch order.
/// `partitions` holds the locked row of every partition that exists;
/// `producers` the stored state of every producer touched, `txns` the
/// transactions of the transactional ones.
pub fn plan(
    objects: &[ObjectCommit],
    partitions: &HashMap<(Uuid, i32), LockedPartition>,
    producers: &HashMap<(i64, Uuid, i32), ProducerState>,
    txns: &TxnView,
) -> Plan {
    let mut next: HashMap<(Uuid, i32), (i64, i64, i64)> = HashMap::new();
    let mut states: HashMap<(i64, Uuid, i32), Option<ProducerState>> = HashMap::new();
    let mut plan = Plan::default();
    for object in objects {
        let mut object_outcomes = Vec::with_capacity(object.appends.len());
        for append in &object.appends {
            let tp = (append.topic_id, append.partition);
            let mut outcomes = Vec::with_capacity(append.batches.len());
            let Some(&LockedPartition {
                next_offset: hw, ..
            }) = partitions.get(&tp)
            else {
                outcomes.resize(append.batches.len(), BatchOutcome::UnknownTopicOrPartition);
                object_outcomes.push(outcomes);
                continue;
            };
            let cursor = next.entry(tp).or_insert((hw, -1, 0));
            let mut open: Option<SpanRow> = None;
            for batch in &append.batches {
                let outcome = match batch.producer {
                    None => BatchOutcome::Appended {
                        base_offset: cursor.0,
                    },
                    Some(p) if p.transactional && txn_refusal(txns, p, tp).is_some() => {
                        txn_refusal(txns, p, tp).expect("checked in the guard")
                    }
                    // Kafka refuses it too: the transaction's data and
                    // this batch would share a producer state.
                    Some(p)
                        if !p.transactional
                            && txns.open.contains_key(&(p.producer_id, tp.0, tp.1)) =>
                    {
                        BatchOutcome::PlainBatchInTransaction
                    }
                    Some(p) => {
                        let key = (p.producer_id, append.topic_id, append.partition);
                        let state = states
                            .entry(key)
                            .or_insert_with(|| producers.get(&key).cloned());
                        let last = last_seq(p.base_sequence, batch.offset_count as i32);
                        match ProducerState::check(
                            state.as_ref(),
                            p.producer_epoch,
                            p.base_sequence,
                            last,
                        ) {
                            SeqCheck::Append => {
                                ProducerState::record(
                                    state,
                                    p.producer_epoch,
                                    BatchSeq {
                                        first_seq: p.base_sequence,
                                        last_seq: last,
                                        base_offset: cursor.0,
                                    },
                                );
                                BatchOutcome::Appended {
                                    base_offset: cursor.0,
                                }
                            }
                            SeqCheck::Duplicate { base_offset } => {
                                BatchOutcome::Duplicate { base_offset }
                            }
                            SeqCheck::OutOfOrder => BatchOutcome::OutOfOrderSequence,
                            SeqCheck::InvalidEpoch => BatchOutcome::InvalidProducerEpoch,
                        }
                    }
                };
                if let BatchOutcome::Appended { base_offset } = outcome {
                    if let Some(p) = batch.producer.filter(|p| p.transactional) {
                        let key = (p.producer_id, append.topic_id, append.partition);
                        if !txns.open.contains_key(&key) {
                            plan.opened
                                .entry((append.topic_id, append.partition, p.producer_id))
                                .or_insert(base_offset);
                        }
                    }
                    let last_offset = base_offset + batch.offset_count as i64 - 1;
                    cursor.0 = last_offset + 1;
                    cursor.1 = cursor.1.max(batch.max_timestamp);
                    cursor.2 += batch.byte_len as i64;
                    let extends = open.as_ref().is_some_and(|s| {
                        s.byte_start as u64 + s.byte_len as u64 == batch.byte_start
                            && s.byte_len as u64 + batch.byte_len as u64 <= SPAN_BYTES_MAX
                    });
                    if extends {
                        let s = open.as_mut().expect("checked above");
                        s.last_offset = last_offset;
                        s.byte_len += batch.byte_len as i32;
                        s.batch_count += 1;
                        s.max_timestamp = s.max_timestamp.max(batch.max_timestamp);
                    } else {
                        plan.spans.extend(open.take());
                        open = Some(SpanRow {
                            topic_id: append.topic_id,
                            partition: append.partition,
                            base_offset,
                            last_offset,
                            object_key: object.object_key.clone(),
                            byte_start: batch.byte_start as i64,
                            byte_len: batch.byte_len as i32,
                            batch_count: 1,
                            max_timestamp: batch.max_timestamp,
                        });
                    }
                } else {
                    plan.spans.extend(open.take());
                }
                outcomes.push(outcome);
            }
            plan.spans.extend(open.take());
            object_outcomes.push(outcomes);
        }
        plan.result.outcomes.push(object_outcomes);
    }
    for (&(t, p, _), &first) in &plan.opened {
        let pin = plan.pins.entry((t, p)).or_insert(first);
        *pin = (*pin).min(first);
    }
    for (tp, (next_offset, max_ts, bytes)) in next {
        let locked = partitions[&tp];
        let hw = locked.next_offset;
        plan.result.watermarks.insert(
            tp,
            locked.marks(next_offset.max(hw), plan.pins.get(&tp).copied()),
        );
        if next_offset > hw {
            plan.advanced.insert(tp, (next_offset, max_ts, bytes));
        }
    }
    for (key, state) in states {
        if let Some(state) = state {
            if producers.get(&key) != Some(&state) {
                plan.producer_updates.insert(key, state);
            }
        }
    }
    plan
}

/// Why a transactional batch may not join its transaction here, as the
/// partition leader of a Kafka 3.6+ cluster (KIP-890 verification) decides:
/// no transactional id holds the producer id; the epoch is not the current
/// one (a fenced producer); the transaction is not open or does not hold
/// the partition (AddPartitionsToTxn missing, or a late batch of a
/// transaction that already ended).
fn txn_refusal(txns: &TxnView, p: ProducerFields, tp: (Uuid, i32)) -> Option<BatchOutcome> {
    let Some(gate) = txns.gates.get(&p.producer_id) else {
        return Some(BatchOutcome::InvalidProducerIdMapping);
    };
    if gate.producer_epoch != p.producer_epoch {
        return Some(BatchOutcome::InvalidProducerEpoch);
    }
    if !gate.ongoing || !gate.partitions.contains(&tp) {
        return Some(BatchOutcome::InvalidTxnState);
    }
    None
}

/// The commit's statements, prepared once per connection: each execution
/// is then one round trip (no Parse/Describe) and PostgreSQL reuses its plans.
pub struct Statements {
    lock_partitions: tokio_postgres::Statement,
    load_producer_state: tokio_postgres::Statement,
    insert_objects: tokio_postgres::Statement,
    insert_spans: tokio_postgres::Statement,
    advance_partitions: tokio_postgres::Statement,
    upsert_producer_state: tokio_postgres::Statement,
    load_txn_producers: tokio_postgres::Statement,
    load_open_txns: tokio_postgres::Statement,
    insert_open_txns: tokio_postgres::Statement,
}

impl Statements {
    pub async fn prepare(
        client: &tokio_postgres::Client,
    ) -> Result<Statements, tokio_postgres::Error> {
        let (a, b, c, d, e, f) = futures::join!(
            client.prepare(sql::LOCK_PARTITIONS),
            client.prepare(sql::LOAD_PRODUCER_STATE),
            client.prepare(sql::INSERT_OBJECTS),
            client.prepare(sql::INSERT_SPANS),
            client.prepare(sql::ADVANCE_PARTITIONS),
            client.prepare(sql::UPSERT_PRODUCER_STATE),
        );
        let (h, i, j) = futures::join!(
            client.prepare(sql::LOAD_TXN_PRODUCERS),
            client.prepare(sql::LOAD_OPEN_TXNS),
            client.prepare(sql::INSERT_OPEN_TXNS),
        );
        Ok(Statements {
            lock_partitions: a?,
            load_producer_state: b?,
            insert_objects: c?,
            insert_spans: d?,
            advance_partitions: e?,
            upsert_producer_state: f?,
            load_txn_producers: h?,
            load_open_txns: i?,
            insert_open_txns: j?,
        })
    }
}

/// Runs the whole commit in one transaction on `client`, with `st`
/// prepared on that same connection, in two round trips: BEGIN, the
/// partition locks and the producer state are pipelined, and so are the
/// writes and COMMIT (PostgreSQL runs them in order; a failed write turns
/// the COMMIT into a rollback).
pub async fn execute(
    client: &mut tokio_postgres::Client,
    st: &Statements,
    objects: &[ObjectCommit],
) -> Result<CommitResult, MetaError> {
    let result = execute_pipelined(client, st, objects).await;
    if result.is_err() && !client.is_closed() {
        // End whatever the failure left open (a no-op after the COMMIT).
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result
}

async fn execute_pipelined(
    tx: &tokio_postgres::Client,
    st: &Statements,
    objects: &[ObjectCommit],
) -> Result<CommitResult, MetaError> {
    // 1. Lock the touched partitions (sorted, so agents never deadlock).
    let mut tps: Vec<(Uuid, i32)> = objects
        .iter()
        .flat_map(|o| o.appends.iter().map(|a| (a.topic_id, a.partition)))
        .collect();
    tps.sort_unstable();
    tps.dedup();
    let (topic_ids, parts): (Vec<Uuid>, Vec<i32>) = tps.iter().copied().unzip();

    // 2. Producer state, only when idempotent batches are present. Its rows
    // are read after the locks are held: PostgreSQL runs the pipeline in order.
    let mut pkeys: Vec<(i64, Uuid, i32)> = objects
        .iter()
        .flat_map(|o| {
            o.appends.iter().flat_map(|a| {
                a.batches.iter().filter_map(move |b| {
                    b.producer.map(|p| (p.producer_id, a.topic_id, a.partition))
                })
            })
        })
        .collect();
    pkeys.sort_unstable();
    pkeys.dedup();
    let pids: Vec<i64> = pkeys.iter().map(|k| k.0).collect();
    let ptopics: Vec<Uuid> = pkeys.iter().map(|k| k.1).collect();
    let pparts: Vec<i32> = pkeys.iter().map(|k| k.2).collect();
    let load_producers = async {
        if pkeys.is_empty() {
            Ok(Vec::new())
        } else {
            tx.query(&st.load_producer_state, &[&pids, &ptopics, &pparts])
                .await
        }
    };
    // 2b. Transactional producers only: their transactions, share-locked
    // after the partitions, and where they are open.
    let mut txn_pids: Vec<i64> = objects
        .iter()
        .flat_map(|o| o.appends.iter().flat_map(|a| a.batches.iter()))
        .filter_map(|b| {
            b.producer
                .filter(|p| p.transactional)
                .map(|p| p.producer_id)
        })
        .collect();
    txn_pids.sort_unstable();
    txn_pids.dedup();
    let load_txns = async {
        if txn_pids.is_empty() {
            Ok((Vec::new(), Vec::new()))
        } else {
            let params: [&(dyn ToSql + Sync); 1] = [&txn_pids];
            let (gates, open) = futures::join!(
                tx.query(&st.load_txn_producers, &params),
                tx.query(&st.load_open_txns, &params)
            );
            Ok::<_, tokio_postgres::Error>((gates?, open?))
        }
    };
    let lock_params: [&(dyn ToSql + Sync); 2] = [&topic_ids, &parts];
    let (begun, locked, producer_rows, txn_rows) = futures::join!(
        tx.batch_execute("BEGIN"),
        tx.query(&st.lock_partitions, &lock_params),
        load_producers,
        load_txns
    );
    begun?;
    let partitions: HashMap<(Uuid, i32), LockedPartition> = locked?
        .iter()
        .map(|r| ((r.get(0), r.get(1)), locked_from_row(r)))
        .collect();
    let (gate_rows, open_rows) = txn_rows?;
    let mut txns = TxnView::default();
    for r in gate_rows {
        let topics: Vec<Uuid> = r.get(3);
        let parts: Vec<i32> = r.get(4);
        let state: String = r.get(2);
        txns.gates.insert(
            r.get(0),
            TxnGate {
                producer_epoch: r.get(1),
                ongoing: state == "Ongoing",
                partitions: topics.into_iter().zip(parts).collect(),
            },
        );
    }
    for r in open_rows {
        txns.open.insert((r.get(0), r.get(1), r.get(2)), r.get(3));
    }
    // 2c. Rare: non-transactional batches of idempotent producers into
    // partitions with a transaction open (lso_pin) — are those producers'
    // own? One more round trip, only then.
    let mut plain_pids: Vec<i64> = objects
        .iter()
        .flat_map(|o| o.appends.iter())
        .filter(|a| {
            partitions
                .get(&(a.topic_id, a.partition))
                .is_some_and(|l| l.lso_pin.is_some())
        })
        .flat_map(|a| a.batches.iter())
        .filter_map(|b| b.producer.filter(|p| !p.transactional))
        .map(|p| p.producer_id)
        .filter(|pid| txn_pids.binary_search(pid).is_err())
        .collect();
    plain_pids.sort_unstable();
    plain_pids.dedup();
    if !plain_pids.is_empty() {
        for r in tx.query(&st.load_open_txns, &[&plain_pids]).await? {
            txns.open.insert((r.get(0), r.get(1), r.get(2)), r.get(3));
        }
    }
    let mut producers = HashMap::new();
    for r in producer_rows? {
        let history: Vec<i64> = r.get(4);
        producers.insert(
            (r.get(0), r.get(1), r.get(2)),
            ProducerState {
                producer_epoch: r.get(3),
                history: ProducerState::history_from_sql(&history),
            },
        );
    }

    let plan = plan(objects, &partitions, &producers, &txns);

    // 3. Objects, spans, watermarks and producer state: pipelined statements.
    let keys: Vec<&str> = objects.iter().map(|o| o.object_key.as_str()).collect();
    let sizes: Vec<i64> = objects.iter().map(|o| o.size_bytes as i64).collect();
    let agents: Vec<i32> = objects.iter().map(|o| o.agent_id).collect();
    let s = &plan.spans;
    let s_topic: Vec<Uuid> = s.iter().map(|x| x.topic_id).collect();
    let s_part: Vec<i32> = s.iter().map(|x| x.partition).collect();
    let s_base: Vec<i64> = s.iter().map(|x| x.base_offset).collect();
    let s_last: Vec<i64> = s.iter().map(|x| x.last_offset).collect();
    let s_key: Vec<&str> = s.iter().map(|x| x.object_key.as_str()).collect();
    let s_start: Vec<i64> = s.iter().map(|x| x.byte_start).collect();
    let s_len: Vec<i32> = s.iter().map(|x| x.byte_len).collect();
    let s_count: Vec<i32> = s.iter().map(|x| x.batch_count).collect();
    let s_ts: Vec<i64> = s.iter().map(|x| x.max_timestamp).collect();
    let a = &plan.advanced;
    let a_topic: Vec<Uuid> = a.keys().map(|k| k.0).collect();
    let a_part: Vec<i32> = a.keys().map(|k| k.1).collect();
    let a_next: Vec<i64> = a.values().map(|v| v.0).collect();
    let a_ts: Vec<i64> = a.values().map(|v| v.1).collect();
    let a_bytes: Vec<i64> = a.values().map(|v| v.2).collect();
    let a_pin: Vec<Option<i64>> = a.keys().map(|tp| plan.pins.get(tp).copied()).collect();
    let o = &plan.opened;
    let o_topic: Vec<Uuid> = o.keys().map(|k| k.0).collect();
    let o_part: Vec<i32> = o.keys().map(|k| k.1).collect();
    let o_pid: Vec<i64> = o.keys().map(|k| k.2).collect();
    let o_first: Vec<i64> = o.values().copied().collect();
    let p = &plan.producer_updates;
    let p_id: Vec<i64> = p.keys().map(|k| k.0).collect();
    let p_topic: Vec<Uuid> = p.keys().map(|k| k.1).collect();
    let p_part: Vec<i32> = p.keys().map(|k| k.2).collect();
    let p_epoch: Vec<i16> = p.values().map(|v| v.producer_epoch).collect();
    let p_hist: Vec<String> = p.values().map(|v| v.history_to_sql()).collect();

    let objects_params: [&(dyn ToSql + Sync); 3] = [&keys, &sizes, &agents];
    let spans_params: [&(dyn ToSql + Sync); 9] = [
        &s_topic, &s_part, &s_base, &s_last, &s_key, &s_start, &s_len, &s_count, &s_ts,
    ];
    let advance_params: [&(dyn ToSql + Sync); 6] =
        [&a_topic, &a_part, &a_next, &a_ts, &a_bytes, &a_pin];
    let opened_params: [&(dyn ToSql + Sync); 4] = [&o_topic, &o_part, &o_pid, &o_first];
    let producer_params: [&(dyn ToSql + Sync); 5] = [&p_id, &p_topic, &p_part, &p_epoch, &p_hist];
    // The committing agent tells its own shards itself, with the spans:
    // its payloads say who sent them, so it can pass over its own.
    let agent = objects
        .first()
        .map(|o| o.agent_id)
        .filter(|&a| objects.iter().all(|o| o.agent_id == a));
    let notices = marks_payloads(
        agent,
        plan.advanced
            .keys()
            .filter_map(|tp| plan.result.watermarks.get(tp).map(|m| (*tp, *m, None))),
    );
    let insert_objects = tx.execute(&st.insert_objects, &objects_params);
    let insert_spans = async {
        if s.is_empty() {
            Ok(0)
        } else {
            tx.execute(&st.insert_spans, &spans_params).await
        }
    };
    let advance = async {
        if a.is_empty() {
            Ok(0)
        } else {
            tx.execute(&st.advance_partitions, &advance_params).await
        }
    };
    let producers_upsert = async {
        if p.is_empty() {
            Ok(0)
        } else {
            tx.execute(&st.upsert_producer_state, &producer_params)
                .await
        }
    };
    let open_insert = async {
        if o.is_empty() {
            Ok(0)
        } else {
            tx.execute(&st.insert_open_txns, &opened_params).await
        }
    };
    let (r1, r2, r3, r4, r5, committed) = futures::join!(
        insert_objects,
        insert_spans,
        advance,
        producers_upsert,
        open_insert,
        tx.batch_execute("COMMIT")
    );
    r1?;
    r2?;
    let advanced_rows = r3?;
    r4?;
    r5?;
    committed?;
    if advanced_rows as usize != a.len() {
        // Cannot happen: every advanced partition was locked FOR UPDATE in
        // this transaction. Reported rather than asserted (this runs on a
        // shared runtime).
        return Err(MetaError::Invalid(format!(
            "commit advanced {advanced_rows} partitions of {} locked",
            a.len()
        )));
    }
    let mut result = plan.result;
    result.spans = plan.spans;
    result.notices = notices;
    Ok(result)
}

/// A row of `LOCK_PARTITIONS` past its key columns.
pub fn locked_from_row(r: &tokio_postgres::Row) -> LockedPartition {
    LockedPartition {
        next_offset: r.get(2),
        log_start_offset: r.get(3),
        lso_pin: r.get(4),
        abort_seq: r.get(5),
    }
}

/// What a watermark notification says of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarksNews {
    pub topic_id: Uuid,
    pub partition: i32,
    pub marks: PartitionMarks,
    /// The marker just written at `high_watermark - 1` ended an aborted
    /// transaction of this producer id whose data began at this offset.
    pub aborted: Option<(i64, i64)>,
}

/// Watermark NOTIFY payloads: `topic/partition/hw` when the partition has
/// no transaction state (last stable offset = high watermark, no abort
/// ever), else `topic/partition/hw/lso/abort_seq`, plus `/pid/first` for
/// the marker of an aborted transaction. The log start is not carried.
/// With `from_agent` every payload starts with that agent's tag
/// ([`AGENT_TAG`]): a window commit's, whose agent tells its own shards
/// itself.
pub fn marks_payloads(
    from_agent: Option<i32>,
    entries: impl Iterator<Item = ((Uuid, i32), PartitionMarks, Option<(i64, i64)>)>,
) -> Vec<String> {
    let head = from_agent.map_or(String::new(), |a| format!("{AGENT_TAG}{a}"));
    chunked(
        &head,
        entries.map(|((t, p), m, aborted)| {
            let mut e = format!("{}/{}/{}", t.simple(), p, m.high_watermark);
            if m.last_stable_offset != m.high_watermark || m.abort_seq != 0 || aborted.is_some() {
                let _ = write!(e, "/{}/{}", m.last_stable_offset, m.abort_seq);
                if let Some((pid, first)) = aborted {
                    let _ = write!(e, "/{pid}/{first}");
                }
            }
            e
        }),
    )
}

/// What starts the first entry of a window commit's watermark payload: the
/// committing agent's id (`@7 ...`). Parsers that do not know it skip it as
/// an entry that is not a partition.
pub const AGENT_TAG: char = '@';

/// The agent that committed the window a watermark payload announces, when
/// it says.
pub fn payload_agent(payload: &str) -> Option<i32> {
    payload
        .strip_prefix(AGENT_TAG)?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

/// Parses one watermark payload (see [`marks_payloads`]); the log start of
/// each entry is unknown (-1). An agent tag is not an entry.
pub fn parse_marks_payload(payload: &str) -> Vec<MarksNews> {
    payload
        .split(' ')
        .filter_map(|e| {
            let f: Vec<&str> = e.split('/').collect();
            let topic_id = Uuid::parse_str(f.first()?).ok()?;
            let partition = f.get(1)?.parse().ok()?;
            let hw: i64 = f.get(2)?.parse().ok()?;
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<i64>().ok());
            let (lso, seq) = match f.len() {
                3 => (hw, 0),
                5 | 7 => (num(3)?, num(4)?),
                _ => return None,
            };
            let aborted = if f.len() == 7 {
                Some((num(5)?, num(6)?))
            } else {
                None
            };
            Some(MarksNews {
                topic_id,
                partition,
                marks: PartitionMarks {
                    high_watermark: hw,
                    log_start_offset: -1,
                    last_stable_offset: lso,
                    abort_seq: seq,
                },
                aborted,
            })
        })
        .collect()
}

/// Joins entries into payloads under PostgreSQL's 8000-byte limit, each
/// starting with `head` when it is not empty.
fn chunked(head: &str, entries: impl Iterator<Item = String>) -> Vec<String> {
    const PAYLOAD_BYTES_MAX: usize = 7000;
    let mut out = Vec::new();
    let mut cur = head.to_owned();
    let mut any = false;
    for e in entries {
        if any && cur.len() + 1 + e.len() > PAYLOAD_BYTES_MAX {
            out.push(std::mem::replace(&mut cur, head.to_owned()));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&e);
        any = true;
    }
    if any {
        out.push(cur);
    }
    out
}

/// NOTIFY payloads (each under PostgreSQL's 8000-byte limit) of
/// `topic_uuid/partition/offset` entries separated by spaces: high
/// watermarks on `rutomq_watermarks`, log start offsets on `rutomq_log_starts`.
pub fn offset_payloads(entries: impl Iterator<Item = (Uuid, i32, i64)>) -> Vec<String> {
    chunked(
        "",
        entries.map(|(topic, partition, offset)| {
            format!("{}/{}/{}", topic.simple(), partition, offset)
        }),
    )
}

/// Parses one NOTIFY payload back into (topic, partition, offset).
pub fn parse_offset_payload(payload: &str) -> Vec<(Uuid, i32, i64)> {
    payload
        .split(' ')
        .filter_map(|e| {
            let mut it = e.split('/');
            let t = Uuid::parse_str(it.next()?).ok()?;
            let p = it.next()?.parse().ok()?;
            let offset = it.next()?.parse().ok()?;
            Some((t, p, offset))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked(next_offset: i64, log_start_offset: i64) -> LockedPartition {
        LockedPartition {
            next_offset,
            log_start_offset,
            lso_pin: None,
            abort_seq: 0,
        }
    }

    fn batch(start: u64, len: u32, count: u32, producer: Option<ProducerFields>) -> BatchRef {
        BatchRef {
            byte_start: start,
            byte_len: len,
            offset_count: count,
            max_timestamp: start as i64,
            producer,
        }
    }

    /// An object holding `appends` (topic, partition, batches).
    fn object(key: &str, appends: Vec<(Uuid, i32, Vec<BatchRef>)>) -> ObjectCommit {
        let appends: Vec<PartitionAppend> = appends
            .into_iter()
            .map(|(topic_id, partition, batches)| PartitionAppend {
                topic_id,
                partition,
                batches,
            })
            .collect();
        ObjectCommit {
            object_key: key.into(),
            size_bytes: appends
                .iter()
                .flat_map(|a| &a.batches)
                .map(|b| b.byte_len as u64)
                .sum(),
            agent_id: 1,
            commit_deadline: std::time::Instant::now(),
            appends,
        }
    }

    #[test]
    fn offsets_are_contiguous_across_objects_and_spans_merge() {
        let t = Uuid::from_u128(1);
        let objects = vec![
            object(
                "a",
                vec![(t, 0, vec![batch(0, 100, 3, None), batch(100, 100, 2, None)])],
            ),
            object("b", vec![(t, 0, vec![batch(0, 100, 4, None)])]),
        ];
        let partitions = HashMap::from([((t, 0), locked(10, 0))]);
        let p = plan(&objects, &partitions, &HashMap::new(), &TxnView::default());
        assert_eq!(
            p.result.outcomes,
            vec![
                vec![vec![
                    BatchOutcome::Appended { base_offset: 10 },
                    BatchOutcome::Appended { base_offset: 13 }
                ]],
                vec![vec![BatchOutcome::Appended { base_offset: 15 }]],
            ]
        );
        assert_eq!(p.spans.len(), 2);
        assert_eq!((p.spans[0].base_offset, p.spans[0].last_offset), (10, 14));
        assert_eq!(p.spans[0].byte_len, 200);
        assert_eq!(p.spans[0].batch_count, 2);
        assert_eq!((p.spans[1].base_offset, p.spans[1].last_offset), (15, 18));
        assert_eq!(p.advanced[&(t, 0)].0, 19);
        // The retained size grows by every appended batch.
        assert_eq!(p.advanced[&(t, 0)].2, 300);
        assert_eq!(p.result.watermarks[&(t, 0)].high_watermark, 19);
        assert_eq!(p.result.watermarks[&(t, 0)].last_stable_offset, 19);
    }

    #[test]
    fn duplicates_split_spans_and_keep_original_offsets() {
        let t = Uuid::from_u128(2);
        let pf = |seq| {
            Some(ProducerFields {
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: seq,
                transactional: false,
            })
        };
        let objects = vec![object(
            "a",
            vec![(
                t,
                1,
                vec![
                    batch(0, 100, 5, pf(0)),
                    batch(100, 100, 5, pf(0)),
                    batch(200, 100, 5, pf(5)),
                    batch(300, 100, 5, pf(20)),
                ],
            )],
        )];
        let partitions = HashMap::from([((t, 1), locked(0, 0))]);
        let p = plan(&objects, &partitions, &HashMap::new(), &TxnView::default());
        assert_eq!(
            p.result.outcomes[0][0],
            vec![
                BatchOutcome::Appended { base_offset: 0 },
                BatchOutcome::Duplicate { base_offset: 0 },
                BatchOutcome::Appended { base_offset: 5 },
                BatchOutcome::OutOfOrderSequence,
            ]
        );
        assert_eq!(p.spans.len(), 2, "the duplicate is not part of any span");
        assert_eq!(p.spans[1].byte_start, 200);
        assert_eq!(p.producer_updates[&(7, t, 1)].history.len(), 2);
    }

    #[test]
    fn unknown_partitions_fail_only_their_batches() {
        let t = Uuid::from_u128(3);
        let objects = vec![object(
            "a",
            vec![
                (t, 9, vec![batch(0, 100, 1, None)]),
                (t, 0, vec![batch(100, 100, 1, None)]),
            ],
        )];
        let partitions = HashMap::from([((t, 0), locked(0, 0))]);
        let p = plan(&objects, &partitions, &HashMap::new(), &TxnView::default());
        assert_eq!(
            p.result.outcomes[0],
            vec![
                vec![BatchOutcome::UnknownTopicOrPartition],
                vec![BatchOutcome::Appended { base_offset: 0 }]
            ]
        );
    }

    #[test]
    fn transactional_batches_join_only_their_open_transaction() {
        let t = Uuid::from_u128(5);
        let pf = |pid, epoch, seq| {
            Some(ProducerFields {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: seq,
                transactional: true,
            })
        };
        let objects = vec![object(
            "a",
            vec![
                (
                    t,
                    0,
                    vec![
                        batch(0, 100, 2, pf(7, 1, 0)),
                        batch(100, 100, 2, pf(7, 0, 2)),
                        batch(200, 100, 1, pf(8, 0, 0)),
                        batch(300, 100, 1, pf(9, 0, 0)),
                    ],
                ),
                (t, 1, vec![batch(400, 100, 1, pf(7, 1, 0))]),
            ],
        )];
        let mut partitions = HashMap::from([((t, 0), locked(10, 0)), ((t, 1), locked(5, 0))]);
        partitions.get_mut(&(t, 0)).unwrap().lso_pin = Some(4);
        let mut txns = TxnView::default();
        txns.gates.insert(
            7,
            TxnGate {
                producer_epoch: 1,
                ongoing: true,
                partitions: HashSet::from([(t, 0)]),
            },
        );
        txns.gates.insert(
            8,
            TxnGate {
                producer_epoch: 0,
                ongoing: false,
                partitions: HashSet::from([(t, 0)]),
            },
        );
        let p = plan(&objects, &partitions, &HashMap::new(), &txns);
        assert_eq!(
            p.result.outcomes[0],
            vec![
                vec![
                    BatchOutcome::Appended { base_offset: 10 },
                    BatchOutcome::InvalidProducerEpoch,
                    BatchOutcome::InvalidTxnState,
                    BatchOutcome::InvalidProducerIdMapping,
                ],
                vec![BatchOutcome::InvalidTxnState],
            ]
        );
        assert_eq!(p.opened, HashMap::from([((t, 0, 7), 10)]));
        let m = p.result.watermarks[&(t, 0)];
        assert_eq!((m.high_watermark, m.last_stable_offset), (12, 4));
    }

    #[test]
    fn plain_batches_of_a_producer_with_an_open_transaction_are_refused() {
        let t = Uuid::from_u128(7);
        let plain = |pid| {
            Some(ProducerFields {
                producer_id: pid,
                producer_epoch: 0,
                base_sequence: 0,
                transactional: false,
            })
        };
        let objects = vec![object(
            "a",
            vec![
                (
                    t,
                    0,
                    vec![batch(0, 100, 2, plain(7)), batch(100, 100, 2, plain(8))],
                ),
                (t, 1, vec![batch(200, 100, 1, plain(7))]),
            ],
        )];
        let partitions = HashMap::from([((t, 0), locked(10, 0)), ((t, 1), locked(5, 0))]);
        let mut txns = TxnView::default();
        txns.open.insert((7, t, 0), 4);
        let p = plan(&objects, &partitions, &HashMap::new(), &txns);
        assert_eq!(
            p.result.outcomes[0],
            vec![
                vec![
                    BatchOutcome::PlainBatchInTransaction,
                    BatchOutcome::Appended { base_offset: 10 },
                ],
                vec![BatchOutcome::Appended { base_offset: 5 }],
            ]
        );
    }

    #[test]
    fn marks_payload_round_trip() {
        let t = Uuid::from_u128(6);
        let m = |hw, lso, seq| PartitionMarks {
            high_watermark: hw,
            log_start_offset: 0,
            last_stable_offset: lso,
            abort_seq: seq,
        };
        let payloads = marks_payloads(
            None,
            [
                ((t, 0), m(5, 5, 0), None),
                ((t, 1), m(9, 3, 2), None),
                ((t, 2), m(7, 7, 1), Some((42, 2))),
            ]
            .into_iter(),
        );
        let news = parse_marks_payload(&payloads[0]);
        // A window commit's payload names its agent first; parsers pass it.
        let tagged = marks_payloads(
            Some(12),
            [
                ((t, 0), m(5, 5, 0), None),
                ((t, 1), m(9, 3, 2), None),
                ((t, 2), m(7, 7, 1), Some((42, 2))),
            ]
            .into_iter(),
        )
        .remove(0);
        assert_eq!(tagged, format!("{AGENT_TAG}12 {}", payloads[0]));
        // Split under the limit, every payload with its tag.
        let many = marks_payloads(
            Some(3),
            (0..500).map(|p| ((t, p), m(p as i64, p as i64, 0), None)),
        );
        assert!(many.len() > 1);
        assert!(many.iter().all(|p| p.starts_with("@3 ") && p.len() <= 7000));
        assert!(many.iter().all(|p| payload_agent(p) == Some(3)));
        assert_eq!(
            many.iter()
                .map(|p| parse_marks_payload(p).len())
                .sum::<usize>(),
            500
        );
        assert_eq!(payload_agent(&tagged), Some(12));
        assert_eq!(payload_agent(&payloads[0]), None);
        assert_eq!(parse_marks_payload(&tagged), news);
        assert_eq!(news.len(), 3);
        assert_eq!(
            (
                news[0].marks.high_watermark,
                news[0].marks.last_stable_offset
            ),
            (5, 5)
        );
        assert_eq!(
            (news[1].marks.last_stable_offset, news[1].marks.abort_seq),
            (3, 2)
        );
        assert_eq!(news[2].aborted, Some((42, 2)));
        assert!(parse_marks_payload("junk/1").is_empty());
    }

    #[test]
    fn notify_payload_round_trip() {
        let t = Uuid::from_u128(4);
        let payloads = offset_payloads([(t, 3, 42)].into_iter());
        assert_eq!(parse_offset_payload(&payloads[0]), vec![(t, 3, 42)]);
    }
}
