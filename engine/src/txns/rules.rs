//! Kafka's transaction rules (`TransactionCoordinator` and
//! `TransactionMetadata` of the classic protocol) as decisions on what
//! PostgreSQL holds: each returns the answer and the change to write.

use rutomq_meta::txn::{TxnChange, TxnEnd, TxnLocked, TxnRecord, TxnState};
use uuid::Uuid;

use crate::error::ErrorCode;
use crate::limits::TXN_PARTITIONS_MAX;

/// An epoch this high is not bumped further: the id gets a new producer
/// id at epoch 0 (Kafka: `Short.MaxValue - 1`).
const EPOCH_EXHAUSTED: i16 = i16::MAX - 1;

/// What InitProducerId asks.
#[derive(Clone, Copy, Debug)]
pub struct InitAsk {
    pub timeout_ms: i32,
    /// KIP-360: the producer id and epoch the client holds (v3+; `None`
    /// for -1/-1).
    pub expected: Option<(i64, i16)>,
}

fn row(t: &TxnRecord) -> TxnRecord {
    TxnRecord {
        partitions: Vec::new(),
        groups: Vec::new(),
        ..t.clone()
    }
}

fn change(row: TxnRecord) -> TxnChange {
    TxnChange {
        end: None,
        row,
        add_partitions: Vec::new(),
        add_group: None,
    }
}

/// InitProducerId with a transactional id: a new id gets a producer id at
/// epoch 0; a known one is fenced (epoch + 1, or a new producer id once the
/// epoch is exhausted), its open transaction aborted first with the
/// fencing epoch.
pub fn init_producer_id(
    id: &[u8],
    ask: InitAsk,
    found: &TxnLocked,
) -> (Result<(i64, i16), ErrorCode>, Option<TxnChange>) {
    let fresh = found.fresh_producer_id;
    let Some(t) = &found.txn else {
        let Some(pid) = fresh else {
            return (Err(ErrorCode::CoordinatorNotAvailable), None);
        };
        let new = TxnRecord {
            transactional_id: id.to_vec(),
            producer_id: pid,
            producer_epoch: 0,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms: ask.timeout_ms,
            state: TxnState::Empty,
            start_ms: -1,
            updated_ms: found.now_ms,
            partitions: Vec::new(),
            groups: Vec::new(),
        };
        return (Ok((pid, 0)), Some(change(new)));
    };
    if let Some((pid, epoch)) = ask.expected {
        let current = pid == t.producer_id && epoch == t.producer_epoch;
        // A retried bump (or rotation) whose answer was lost: the same
        // answer again, no second bump.
        let retried = epoch == t.last_producer_epoch
            && (pid == t.producer_id || pid == t.last_producer_id)
            && t.state != TxnState::Ongoing;
        if retried && !current {
            return (Ok((t.producer_id, t.producer_epoch)), None);
        }
        if !current {
            return (Err(ErrorCode::ProducerFenced), None);
        }
    }
    let mut end = None;
    let mut base = t.producer_epoch;
    if t.state == TxnState::Ongoing {
        // Fence the producer that holds the open transaction and abort it
        // with the fencing epoch (Kafka answers CONCURRENT_TRANSACTIONS and
        // bumps again on the retry; here both happen in one step).
        let fence = t.producer_epoch.saturating_add(1);
        end = Some(TxnEnd {
            commit: false,
            marker_epoch: fence,
        });
        base = fence;
    }
    let mut new = row(t);
    new.timeout_ms = ask.timeout_ms;
    new.state = TxnState::Empty;
    new.start_ms = -1;
    if base >= EPOCH_EXHAUSTED {
        let Some(pid) = fresh else {
            return (Err(ErrorCode::CoordinatorNotAvailable), None);
        };
        new.last_producer_id = t.producer_id;
        new.last_producer_epoch = base;
        new.producer_id = pid;
        new.producer_epoch = 0;
    } else {
        new.last_producer_id = t.producer_id;
        new.last_producer_epoch = t.producer_epoch;
        new.producer_epoch = base + 1;
    }
    let answer = (new.producer_id, new.producer_epoch);
    let mut c = change(new);
    c.end = end;
    (Ok(answer), Some(c))
}

/// What AddPartitionsToTxn or AddOffsetsToTxn adds.
#[derive(Clone, Debug)]
pub enum AddTo {
    Partitions(Vec<(Uuid, i32)>),
    Group(String),
}

/// Checks the producer against the id's current producer id and epoch.
fn check_producer(
    found: &TxnLocked,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<&TxnRecord, ErrorCode> {
    let t = found
        .txn
        .as_ref()
        .ok_or(ErrorCode::InvalidProducerIdMapping)?;
    if t.producer_id != producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if t.producer_epoch != producer_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    Ok(t)
}

/// AddPartitionsToTxn / AddOffsetsToTxn: the transaction opens (its timer
/// starts) with its first partition or group.
pub fn add_to_txn(
    producer_id: i64,
    producer_epoch: i16,
    add: &AddTo,
    found: &TxnLocked,
) -> (ErrorCode, Option<TxnChange>) {
    let t = match check_producer(found, producer_id, producer_epoch) {
        Ok(t) => t,
        Err(e) => return (e, None),
    };
    let ongoing = t.state == TxnState::Ongoing;
    let known = match add {
        AddTo::Partitions(ps) => ps.iter().all(|p| t.partitions.binary_search(p).is_ok()),
        AddTo::Group(g) => t.groups.iter().any(|x| x == g),
    };
    if ongoing && known {
        return (ErrorCode::None, None);
    }
    if let AddTo::Partitions(ps) = add {
        if t.partitions.len() + ps.len() > TXN_PARTITIONS_MAX {
            tracing::info!(
                partitions = t.partitions.len() + ps.len(),
                max = TXN_PARTITIONS_MAX,
                "AddPartitionsToTxn refused: too many partitions in one transaction"
            );
            return (ErrorCode::InvalidRequest, None);
        }
    }
    let mut new = row(t);
    new.state = TxnState::Ongoing;
    if !ongoing {
        new.start_ms = found.now_ms;
    }
    let mut c = change(new);
    match add {
        AddTo::Partitions(ps) => c.add_partitions = ps.clone(),
        AddTo::Group(g) => c.add_group = Some(g.clone()),
    }
    (ErrorCode::None, Some(c))
}

/// EndTxn: commits or aborts the open transaction; a repeated end of the
/// same kind after it completed succeeds (Flink's committer retries).
pub fn end_txn(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    found: &TxnLocked,
) -> (ErrorCode, Option<TxnChange>) {
    let t = match check_producer(found, producer_id, producer_epoch) {
        Ok(t) => t,
        Err(e) => return (e, None),
    };
    match (t.state, commit) {
        (TxnState::Ongoing, _) => {
            let mut new = row(t);
            new.state = if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            };
            new.start_ms = -1;
            let mut c = change(new);
            c.end = Some(TxnEnd {
                commit,
                marker_epoch: t.producer_epoch,
            });
            (ErrorCode::None, Some(c))
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
            (ErrorCode::None, None)
        }
        _ => (ErrorCode::InvalidTxnState, None),
    }
}

/// The timeout abort: an open transaction past its timeout is aborted with
/// the epoch bumped, which fences its producer. Answers the fencing epoch.
pub fn timeout_abort(found: &TxnLocked) -> (Option<i16>, Option<TxnChange>) {
    let Some(t) = &found.txn else {
        return (None, None);
    };
    let due = t.state == TxnState::Ongoing
        && t.start_ms >= 0
        && t.start_ms + (t.timeout_ms as i64) < found.now_ms;
    if !due {
        return (None, None);
    }
    let (epoch, c) = fence_and_abort(t);
    (Some(epoch), Some(c))
}

/// An operator's abort (WriteTxnMarkers from `kafka-transactions.sh
/// abort`): the whole open transaction of `producer_id` ends, in every
/// partition at once, its producer fenced. Answers whether one was open.
pub fn operator_abort(producer_id: i64, found: &TxnLocked) -> (bool, Option<TxnChange>) {
    match &found.txn {
        Some(t) if t.state == TxnState::Ongoing && t.producer_id == producer_id => {
            (true, Some(fence_and_abort(t).1))
        }
        _ => (false, None),
    }
}

/// Aborts `t`'s open transaction with its epoch bumped.
fn fence_and_abort(t: &TxnRecord) -> (i16, TxnChange) {
    let fence = t.producer_epoch.saturating_add(1);
    let mut new = row(t);
    new.state = TxnState::CompleteAbort;
    new.start_ms = -1;
    new.last_producer_epoch = t.producer_epoch;
    new.producer_epoch = fence;
    let mut c = change(new);
    c.end = Some(TxnEnd {
        commit: false,
        marker_epoch: fence,
    });
    (fence, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn found(txn: Option<TxnRecord>) -> TxnLocked {
        TxnLocked {
            txn,
            fresh_producer_id: Some(5000),
            partitions: HashMap::new(),
            open: HashMap::new(),
            now_ms: 1_000_000,
        }
    }

    fn record(pid: i64, epoch: i16, state: TxnState) -> TxnRecord {
        TxnRecord {
            transactional_id: b"t".to_vec(),
            producer_id: pid,
            producer_epoch: epoch,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            start_ms: if state == TxnState::Ongoing {
                999_000
            } else {
                -1
            },
            updated_ms: 0,
            partitions: vec![(Uuid::from_u128(1), 0)],
            groups: Vec::new(),
        }
    }

    const ASK: InitAsk = InitAsk {
        timeout_ms: 60_000,
        expected: None,
    };

    #[test]
    fn fresh_ids_start_at_epoch_zero_and_known_ones_are_bumped() {
        let (r, c) = init_producer_id(b"t", ASK, &found(None));
        assert_eq!(r, Ok((5000, 0)));
        assert!(c.unwrap().end.is_none());
        let (r, _) = init_producer_id(
            b"t",
            ASK,
            &found(Some(record(7, 3, TxnState::CompleteCommit))),
        );
        assert_eq!(r, Ok((7, 4)));
    }

    #[test]
    fn init_on_an_open_transaction_aborts_it_with_the_fencing_epoch() {
        let (r, c) = init_producer_id(b"t", ASK, &found(Some(record(7, 3, TxnState::Ongoing))));
        assert_eq!(r, Ok((7, 5)));
        assert_eq!(
            c.unwrap().end,
            Some(TxnEnd {
                commit: false,
                marker_epoch: 4
            })
        );
    }

    #[test]
    fn an_exhausted_epoch_rotates_the_producer_id() {
        let (r, c) = init_producer_id(
            b"t",
            ASK,
            &found(Some(record(7, EPOCH_EXHAUSTED, TxnState::Empty))),
        );
        assert_eq!(r, Ok((5000, 0)));
        assert_eq!(c.unwrap().row.last_producer_id, 7);
    }

    #[test]
    fn kip360_expectations() {
        let f = found(Some(record(7, 3, TxnState::Empty)));
        let ask = |pid, epoch| InitAsk {
            timeout_ms: 60_000,
            expected: Some((pid, epoch)),
        };
        assert_eq!(init_producer_id(b"t", ask(7, 3), &f).0, Ok((7, 4)));
        assert_eq!(
            init_producer_id(b"t", ask(8, 3), &f).0,
            Err(ErrorCode::ProducerFenced)
        );
        assert_eq!(
            init_producer_id(b"t", ask(7, 1), &f).0,
            Err(ErrorCode::ProducerFenced)
        );
    }

    #[test]
    fn end_rules() {
        let ongoing = found(Some(record(7, 3, TxnState::Ongoing)));
        assert_eq!(end_txn(7, 3, true, &ongoing).0, ErrorCode::None);
        assert_eq!(end_txn(7, 2, true, &ongoing).0, ErrorCode::ProducerFenced);
        assert_eq!(
            end_txn(8, 3, true, &ongoing).0,
            ErrorCode::InvalidProducerIdMapping
        );
        assert_eq!(
            end_txn(7, 3, true, &found(None)).0,
            ErrorCode::InvalidProducerIdMapping
        );
        let committed = found(Some(record(7, 3, TxnState::CompleteCommit)));
        let (code, c) = end_txn(7, 3, true, &committed);
        assert_eq!(
            (code, c.is_none()),
            (ErrorCode::None, true),
            "a repeated commit succeeds"
        );
        assert_eq!(
            end_txn(7, 3, false, &committed).0,
            ErrorCode::InvalidTxnState
        );
        let empty = found(Some(record(7, 3, TxnState::Empty)));
        assert_eq!(end_txn(7, 3, true, &empty).0, ErrorCode::InvalidTxnState);
    }

    #[test]
    fn adding_opens_the_transaction_once() {
        let t = Uuid::from_u128(1);
        let empty = found(Some(record(7, 3, TxnState::Empty)));
        let (code, c) = add_to_txn(7, 3, &AddTo::Partitions(vec![(t, 1)]), &empty);
        assert_eq!(code, ErrorCode::None);
        let c = c.unwrap();
        assert_eq!(
            (c.row.state, c.row.start_ms),
            (TxnState::Ongoing, 1_000_000)
        );
        let ongoing = found(Some(record(7, 3, TxnState::Ongoing)));
        let (code, c) = add_to_txn(7, 3, &AddTo::Partitions(vec![(t, 0)]), &ongoing);
        assert_eq!((code, c.is_none()), (ErrorCode::None, true));
        assert_eq!(
            add_to_txn(7, 2, &AddTo::Group("g".into()), &ongoing).0,
            ErrorCode::ProducerFenced
        );
    }

    #[test]
    fn timeouts_fence() {
        let mut r = record(7, 3, TxnState::Ongoing);
        r.start_ms = 1;
        let (epoch, c) = timeout_abort(&found(Some(r)));
        assert_eq!(epoch, Some(4));
        assert_eq!(c.unwrap().row.producer_epoch, 4);
        assert_eq!(
            timeout_abort(&found(Some(record(7, 3, TxnState::Ongoing)))).0,
            None
        );
    }
}
