//! DescribeTransactions (key 65): each transactional id's state, answered
//! by its coordinator (`kafka-transactions.sh describe`).

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
    TransactionalId,
};

use super::access::{allowed, visible};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;
use crate::txns;

/// DescribeTransactions, version 0.
pub const API: Api<DescribeTransactionsRequest> = Api::new(ApiKey::DescribeTransactions, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut out = Vec::with_capacity(body.transactional_ids.len());
    let mut mine = Vec::new();
    for id in &body.transactional_ids {
        let base = blank(id);
        // Kafka: DESCRIBE on the transactional id.
        if !allowed(shard, req, op::DESCRIBE, resource::TRANSACTIONAL_ID, id) {
            out.push(Some(base.with_error_code(
                ErrorCode::TransactionalIdAuthorizationFailed.code(),
            )));
            continue;
        }
        match txns::coordinates(&shard.agent, id.0.as_str()) {
            Err(e) => out.push(Some(base.with_error_code(e.code()))),
            Ok(()) => {
                mine.push(id.0.as_bytes().to_vec());
                out.push(None);
            }
        }
    }
    let found = if mine.is_empty() {
        Ok(Vec::new())
    } else {
        shard.agent.meta.txn_describe(mine).await
    };
    let (found, lookup_error) = match found {
        Ok(f) => (f, ErrorCode::TransactionalIdNotFound),
        Err(e) => {
            tracing::warn!(error = %e, "DescribeTransactions failed");
            (Vec::new(), ErrorCode::CoordinatorNotAvailable)
        }
    };
    let mut states = Vec::with_capacity(out.len());
    for (id, slot) in body.transactional_ids.iter().zip(out) {
        if let Some(s) = slot {
            states.push(s);
            continue;
        }
        let base = blank(id);
        let Some(t) = found.iter().find(|t| t.transactional_id == id.0.as_bytes()) else {
            states.push(base.with_error_code(lookup_error.code()));
            continue;
        };
        let mut topics: Vec<TopicData> = Vec::new();
        for &(topic_id, p) in &t.partitions {
            let Ok(Some(rec)) = shard.topics.by_id(topic_id).await else {
                continue; // deleted since it was added
            };
            // Kafka leaves out the topics the principal may not describe.
            if !visible(shard, req, op::DESCRIBE, resource::TOPIC, &rec.name) {
                continue;
            }
            match topics.iter_mut().find(|d| d.topic.0.as_str() == rec.name) {
                Some(d) => d.partitions.push(p),
                None => topics.push(
                    TopicData::default()
                        .with_topic(TopicName(str_bytes(&rec.name)))
                        .with_partitions(vec![p]),
                ),
            }
        }
        states.push(
            base.with_transaction_state(str_bytes(t.state.name()))
                .with_transaction_timeout_ms(t.timeout_ms)
                .with_transaction_start_time_ms(t.start_ms)
                .with_producer_id(ProducerId(t.producer_id))
                .with_producer_epoch(t.producer_epoch)
                .with_topics(topics),
        );
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// The answer for `id` before anything is known of it.
fn blank(id: &TransactionalId) -> TransactionState {
    TransactionState::default()
        .with_transactional_id(id.clone())
        .with_transaction_start_time_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
        .with_transaction_state(str_bytes(""))
}
