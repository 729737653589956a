//! The transaction coordinator: Kafka's transaction state machine (the
//! classic protocol, KIP-98 with KIP-360/588 epoch handling) over state
//! kept only in PostgreSQL.
//!
//! A transactional id is coordinated by the live agent with the highest
//! rendezvous score for it, as groups are; FindCoordinator names it and the
//! others answer NOT_COORDINATOR. Unlike a group, nothing is held in
//! memory: each request is one PostgreSQL transaction on the id's locked
//! row ([`rutomq_meta::Meta::txn_apply`]), so a takeover needs no load and
//! two agents that briefly both think they own an id still apply its
//! changes one after the other, each on the state the other left. The
//! rules below only decide; they are pure functions of what was found.

mod rules;

pub use rules::{
    add_to_txn, end_txn, init_producer_id, operator_abort, timeout_abort, AddTo, InitAsk,
};

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rutomq_meta::txn::{TxnChange, TxnLocked};

use crate::agent::Agent;
use crate::error::ErrorCode;
use crate::limits::{
    TRANSACTIONAL_ID_BYTES_MAX, TXN_EXPIRE_INTERVAL, TXN_EXPIRE_MAX, TXN_TIMEOUT_SCAN_INTERVAL,
    TXN_TIMEOUT_SCAN_MAX,
};

/// Checks that this agent coordinates transactional id `id`: INVALID_REQUEST
/// for an empty or oversized id, NOT_COORDINATOR when another agent does.
pub fn coordinates(agent: &Agent, id: &str) -> Result<(), ErrorCode> {
    if id.is_empty() || id.len() > TRANSACTIONAL_ID_BYTES_MAX {
        tracing::info!(
            len = id.len(),
            "transactional id refused: empty or too long"
        );
        return Err(ErrorCode::InvalidRequest);
    }
    if agent.coordinator_for(id).agent_id != agent.agent_id {
        return Err(ErrorCode::NotCoordinator);
    }
    Ok(())
}

/// Runs one change of transactional id `id` in PostgreSQL (see
/// [`rutomq_meta::Meta::txn_apply`]) with `decide` as its rule; PostgreSQL
/// out of reach is COORDINATOR_NOT_AVAILABLE, which clients retry.
pub async fn apply<R: Send + 'static>(
    agent: &Agent,
    id: &str,
    lock_partitions: bool,
    fresh_producer_id: bool,
    what: &'static str,
    decide: impl FnMut(&TxnLocked) -> (R, Option<TxnChange>) + Send + 'static,
) -> Result<R, ErrorCode> {
    let started = Instant::now();
    let applied = agent
        .meta
        .txn_apply(
            id.as_bytes().to_vec(),
            lock_partitions,
            fresh_producer_id,
            decide,
        )
        .await;
    agent.txn_stats.observe_change(what, started.elapsed());
    applied.map_err(|e| {
        tracing::warn!(error = %e, request = what, "transaction change failed");
        ErrorCode::CoordinatorNotAvailable
    })
}

/// [`apply`] for a request this agent must coordinate ([`coordinates`]).
pub async fn coordinated<R: Send + 'static>(
    agent: &Agent,
    id: &str,
    lock_partitions: bool,
    fresh_producer_id: bool,
    what: &'static str,
    decide: impl FnMut(&TxnLocked) -> (R, Option<TxnChange>) + Send + 'static,
) -> Result<R, ErrorCode> {
    coordinates(agent, id)?;
    apply(agent, id, lock_partitions, fresh_producer_id, what, decide).await
}

/// PRODUCER_FENCED for versions that know it, else INVALID_PRODUCER_EPOCH
/// (what Kafka answers to clients older than KIP-588).
pub fn fenced_for(code: ErrorCode, version: i16, fenced_since: i16) -> ErrorCode {
    if code == ErrorCode::ProducerFenced && version < fenced_since {
        ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}

/// Aborts, every [`TXN_TIMEOUT_SCAN_INTERVAL`], the open transactions this
/// agent coordinates that are past their timeout (Kafka's
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`). The
/// abort fences the producer (epoch + 1), so its late requests fail.
pub async fn run_timeouts(agent: Arc<Agent>) {
    let mut expired_at = Instant::now();
    loop {
        tokio::time::sleep(TXN_TIMEOUT_SCAN_INTERVAL).await;
        if agent.stopping.load(Ordering::Relaxed) {
            return;
        }
        if expired_at.elapsed() >= TXN_EXPIRE_INTERVAL {
            // Any agent may forget idle ids: the delete is one statement.
            expired_at = Instant::now();
            let idle = agent.cfg.transactional_id_expiration_ms;
            match agent.meta.txn_expire(idle, TXN_EXPIRE_MAX).await {
                Ok(0) => {}
                Ok(n) => {
                    agent.txn_stats.expired_ids.fetch_add(n, Ordering::Relaxed);
                    tracing::info!(ids = n, idle_ms = idle, "idle transactional ids expired");
                }
                Err(e) => tracing::warn!(error = %e, "cannot expire idle transactional ids"),
            }
        }
        let ids = match agent.meta.txn_timed_out(TXN_TIMEOUT_SCAN_MAX).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for timed-out transactions");
                continue;
            }
        };
        for id in ids {
            // Ids are stored from protocol strings: valid UTF-8.
            let name = String::from_utf8_lossy(&id).into_owned();
            if agent.coordinator_for(&name).agent_id != agent.agent_id {
                continue;
            }
            match agent.meta.txn_apply(id, true, false, timeout_abort).await {
                Ok(Some(epoch)) => {
                    agent
                        .txn_stats
                        .timeout_aborts
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::info!(transactional_id = %name.escape_debug(), fenced_epoch = epoch, "transaction timed out: aborted")
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(transactional_id = %name.escape_debug(), error = %e, "cannot abort a timed-out transaction")
                }
            }
        }
    }
}
