//! DescribeProducers (key 61, KIP-664): per partition, the producers with
//! idempotence state there and the first offset of their open transaction
//! (`kafka-transactions.sh describe-producers` and `find-hanging`). Any
//! agent answers: the state is in PostgreSQL.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{ApiKey, DescribeProducersRequest, DescribeProducersResponse};

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::limits::PRODUCERS_DESCRIBED_MAX;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// DescribeProducers, version 0.
pub const API: Api<DescribeProducersRequest> = Api::new(ApiKey::DescribeProducers, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut topics = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        // Kafka: READ on the topic.
        let topic = if allowed(shard, req, op::READ, resource::TOPIC, &t.name) {
            shard.topics.by_name(t.name.0.as_str()).await
        } else {
            Err(ErrorCode::TopicAuthorizationFailed)
        };
        let mut parts: Vec<PartitionResponse> = t
            .partition_indexes
            .iter()
            .map(|&p| PartitionResponse::default().with_partition_index(p))
            .collect();
        match &topic {
            Ok(Some(rec)) => {
                let wanted: Vec<i32> = t
                    .partition_indexes
                    .iter()
                    .copied()
                    .filter(|&p| p >= 0 && p < rec.partitions)
                    .collect();
                let found = shard
                    .agent
                    .meta
                    .txn_producers(rec.topic_id, wanted, PRODUCERS_DESCRIBED_MAX)
                    .await;
                match found {
                    Ok(producers) => {
                        for part in parts.iter_mut() {
                            if part.partition_index < 0 || part.partition_index >= rec.partitions {
                                part.error_code = ErrorCode::UnknownTopicOrPartition.code();
                                continue;
                            }
                            part.active_producers = producers
                                .iter()
                                .filter(|p| p.partition == part.partition_index)
                                .map(|p| {
                                    ProducerState::default()
                                        .with_producer_id(p.producer_id.into())
                                        .with_producer_epoch(p.producer_epoch as i32)
                                        .with_last_sequence(p.last_sequence)
                                        .with_last_timestamp(p.last_timestamp_ms)
                                        .with_coordinator_epoch(0)
                                        .with_current_txn_start_offset(p.current_txn_start_offset)
                                })
                                .collect();
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "DescribeProducers failed");
                        for part in parts.iter_mut() {
                            part.error_code = ErrorCode::from(&e).code();
                        }
                    }
                }
            }
            Ok(None) => {
                for part in parts.iter_mut() {
                    part.error_code = ErrorCode::UnknownTopicOrPartition.code();
                }
            }
            Err(e) => {
                for part in parts.iter_mut() {
                    part.error_code = e.code();
                }
            }
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    DescribeProducersResponse::default().with_topics(topics)
}
