//! DeleteRecords (key 21): move partitions' log start offsets forward, as
//! `kafka-delete-records` and `AdminClient.deleteRecords` do. The records
//! before the new log start can no longer be fetched; their spans are
//! dropped and objects deleted by the collector (`gc`).

use std::collections::BTreeMap;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
use rutomq_meta::LogStartOutcome;

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// DeleteRecords, versions 0–2.
pub const API: Api<DeleteRecordsRequest> = Api::new(ApiKey::DeleteRecords, 0, 2);

pub async fn handle(shard: &Shard, req: &Req, body: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(body.topics.len());
    for t in body.topics {
        // One answer per partition; a repeated partition's last offset
        // wins, as in Kafka (which reads them into a map).
        let wanted: BTreeMap<i32, i64> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.offset))
            .collect();
        let result = |p: i32, low: i64, code: ErrorCode| {
            DeleteRecordsPartitionResult::default()
                .with_partition_index(p)
                .with_low_watermark(low)
                .with_error_code(code.code())
        };
        let fail_all = |code: ErrorCode| {
            wanted
                .keys()
                .map(|&p| result(p, -1, code))
                .collect::<Vec<_>>()
        };
        // Kafka: DELETE on the topic.
        let topic = if allowed(shard, req, op::DELETE, resource::TOPIC, &t.name) {
            shard.topics.by_name(t.name.0.as_str()).await
        } else {
            Err(ErrorCode::TopicAuthorizationFailed)
        };
        let partitions = match topic {
            Err(code) => fail_all(code),
            Ok(None) => fail_all(ErrorCode::UnknownTopicOrPartition),
            Ok(Some(topic)) => match shard
                .agent
                .meta
                .advance_log_starts(topic.topic_id, wanted.clone().into_iter().collect())
                .await
            {
                Err(e) => fail_all(ErrorCode::from(&e)),
                Ok(outcomes) => outcomes
                    .into_iter()
                    .map(|(p, o)| match o {
                        LogStartOutcome::Moved { low_watermark } => {
                            result(p, low_watermark, ErrorCode::None)
                        }
                        LogStartOutcome::OffsetOutOfRange => {
                            result(p, -1, ErrorCode::OffsetOutOfRange)
                        }
                        LogStartOutcome::UnknownPartition => {
                            result(p, -1, ErrorCode::UnknownTopicOrPartition)
                        }
                    })
                    .collect(),
            },
        };
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
