//! ListTransactions (key 66): the transactional ids this agent coordinates,
//! filtered by state, producer id, duration (v1) and id pattern (v2). Every
//! agent lists only its own, so `kafka-transactions.sh list` (which asks
//! them all) names each id once.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use rutomq_meta::txn::TxnState;

use super::access::visible;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::limits::{
    SUBSCRIPTION_REGEX_BYTES_MAX, SUBSCRIPTION_REGEX_COMPILED_BYTES_MAX, TXN_LIST_MAX,
};
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// ListTransactions, versions 0–2.
pub const API: Api<ListTransactionsRequest> = Api::new(ApiKey::ListTransactions, 0, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let resp = ListTransactionsResponse::default();
    let (mut states, mut unknown) = (Vec::new(), Vec::new());
    for f in &body.state_filters {
        match TxnState::parse(f.as_str()) {
            Some(s) => states.push(s.name().to_owned()),
            None => unknown.push(f.clone()),
        }
    }
    if !body.state_filters.is_empty() && states.is_empty() {
        // Only unknown states asked for: nothing can match.
        return resp.with_unknown_state_filters(unknown);
    }
    let pattern = match &body.transactional_id_pattern {
        Some(p) if !p.is_empty() => {
            let re = (p.len() <= SUBSCRIPTION_REGEX_BYTES_MAX)
                .then(|| {
                    regex::RegexBuilder::new(&format!("^(?:{})$", p.as_str()))
                        .size_limit(SUBSCRIPTION_REGEX_COMPILED_BYTES_MAX)
                        .build()
                        .ok()
                })
                .flatten();
            match re {
                Some(re) => Some(re),
                None => {
                    tracing::info!(pattern = %p.as_str(), "ListTransactions refused: bad transactional id pattern");
                    return resp.with_error_code(ErrorCode::InvalidRegularExpression.code());
                }
            }
        }
        _ => None,
    };
    let pids: Vec<i64> = body.producer_id_filters.iter().map(|p| p.0).collect();
    let listed = shard
        .agent
        .meta
        .txn_list(
            (!states.is_empty()).then_some(states),
            (!pids.is_empty()).then_some(pids),
            TXN_LIST_MAX,
        )
        .await;
    let listed = match listed {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "ListTransactions failed");
            return resp.with_error_code(ErrorCode::CoordinatorNotAvailable.code());
        }
    };
    let now_ms = crate::wall::now_ms();
    let mut out = Vec::new();
    for (id, pid, state, start_ms) in listed {
        let Ok(name) = String::from_utf8(id) else {
            continue;
        };
        if shard.agent.coordinator_for(&name).agent_id != shard.agent.agent_id {
            continue;
        }
        // v1: only transactions running longer than the filter.
        if body.duration_filter >= 0 && (start_ms < 0 || now_ms - start_ms < body.duration_filter) {
            continue;
        }
        if pattern.as_ref().is_some_and(|re| !re.is_match(&name)) {
            continue;
        }
        // Kafka: only the ids the principal may describe.
        if !visible(shard, req, op::DESCRIBE, resource::TRANSACTIONAL_ID, &name) {
            continue;
        }
        out.push(
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(&name)))
                .with_producer_id(ProducerId(pid))
                .with_transaction_state(str_bytes(state.name())),
        );
    }
    resp.with_unknown_state_filters(unknown)
        .with_transaction_states(out)
}
