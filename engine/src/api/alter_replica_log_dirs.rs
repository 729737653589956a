//! AlterReplicaLogDirs (key 34). An agent has one virtual log directory,
//! the object store, that every partition is in already: moving a
//! partition there is done (nothing moves), any other directory is
//! LOG_DIR_NOT_FOUND, as Kafka answers a directory a broker does not have.

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey};

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// AlterReplicaLogDirs, versions 1–2.
pub const API: Api<AlterReplicaLogDirsRequest> = Api::new(ApiKey::AlterReplicaLogDirs, 1, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    // Kafka: ALTER on the cluster, each partition carrying the refusal.
    let authorized = allowed(shard, req, op::ALTER, resource::CLUSTER, CLUSTER_NAME);
    let mut results = Vec::new();
    for d in body.dirs {
        let here = d.path.as_str() == shard.agent.cfg.log_dir;
        if authorized && !here {
            tracing::info!(client = %req.client_id(), path = %d.path.as_str(),
                log_dir = %shard.agent.cfg.log_dir, "AlterReplicaLogDirs: no such log directory");
        }
        for t in d.topics {
            let topic = if !authorized {
                Err(ErrorCode::ClusterAuthorizationFailed)
            } else if !here {
                Err(ErrorCode::LogDirNotFound)
            } else {
                shard.topics.by_name(t.name.0.as_str()).await
            };
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    let code = match &topic {
                        Err(code) => *code,
                        Ok(Some(rec)) if (0..rec.partitions).contains(&p) => ErrorCode::None,
                        Ok(_) => ErrorCode::UnknownTopicOrPartition,
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code.code())
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(t.name)
                    .with_partitions(partitions),
            );
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}
