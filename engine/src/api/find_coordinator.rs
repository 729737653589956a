//! FindCoordinator (key 10): the agent coordinating a group or a
//! transactional id. Any agent can coordinate any of them (their state is
//! in PostgreSQL); the live agent with the highest rendezvous score for the
//! key does.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::access::{allowed, cluster_allowed};
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// Kafka's coordinator key types.
const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;
/// A share-partition's state ("group:topicId:partition"), which Kafka's
/// brokers find their share coordinator by; any agent serves the
/// share-state APIs (the state is in PostgreSQL).
const KEY_SHARE: i8 = 2;

/// FindCoordinator, versions 0–6.
pub const API: Api<FindCoordinatorRequest> = Api::new(ApiKey::FindCoordinator, 0, 6);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let find = |key: StrBytes| -> Coordinator {
        let base = Coordinator::default().with_node_id(BrokerId(-1));
        // Kafka: DESCRIBE on the group or transactional id.
        let (resource_type, denied) = match body.key_type {
            KEY_GROUP => (resource::GROUP, ErrorCode::GroupAuthorizationFailed),
            _ => (
                resource::TRANSACTIONAL_ID,
                ErrorCode::TransactionalIdAuthorizationFailed,
            ),
        };
        match body.key_type {
            KEY_GROUP | KEY_TRANSACTION
                if !allowed(shard, req, op::DESCRIBE, resource_type, &key) =>
            {
                base.with_key(key).with_error_code(denied.code())
            }
            // Kafka: CLUSTER_ACTION on the cluster.
            KEY_SHARE if !cluster_allowed(shard, req, op::CLUSTER_ACTION) => base
                .with_key(key)
                .with_error_code(ErrorCode::ClusterAuthorizationFailed.code()),
            KEY_SHARE if key.split(':').count() != 3 => base
                .with_key(key)
                .with_error_code(ErrorCode::InvalidRequest.code())
                .with_error_message(Some(str_bytes(
                    "a share coordinator key is group:topicId:partition",
                ))),
            // Groups and transactional ids are spread over the live agents
            // the same way; each kind has its own coordinator.
            KEY_GROUP | KEY_TRANSACTION | KEY_SHARE => {
                let a = shard.agent.coordinator_for(&key);
                match a.endpoint(req.listener_name(shard)) {
                    Some((host, port)) => base
                        .with_key(key)
                        .with_node_id(BrokerId(a.agent_id))
                        .with_host(str_bytes(host))
                        .with_port(port),
                    // The coordinating agent has no such listener: a
                    // configuration error, said as Kafka says it.
                    None => base
                        .with_key(key)
                        .with_error_code(ErrorCode::CoordinatorNotAvailable.code())
                        .with_error_message(Some(str_bytes(&format!(
                            "the coordinating agent {} has no listener {}",
                            a.agent_id,
                            req.listener_name(shard)
                        )))),
                }
            }
            other => base
                .with_key(key)
                .with_error_code(ErrorCode::InvalidRequest.code())
                .with_error_message(Some(str_bytes(&format!(
                    "coordinator key type {other} is not supported"
                )))),
        }
    };
    if req.version >= 4 {
        return FindCoordinatorResponse::default()
            .with_coordinators(body.coordinator_keys.iter().cloned().map(find).collect());
    }
    let c = find(body.key.clone());
    FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_error_message(c.error_message)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port)
}
