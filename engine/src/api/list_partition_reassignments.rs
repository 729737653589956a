//! ListPartitionReassignments (key 46): none, ever. A rutomq partition has
//! no replicas to move (AlterPartitionReassignments starts no
//! reassignment), so the honest list is empty.

use kafka_protocol::messages::{
    ApiKey, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::access::allowed;
use super::{Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// ListPartitionReassignments, version 0.
pub const API: Api<ListPartitionReassignmentsRequest> =
    Api::new(ApiKey::ListPartitionReassignments, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    _body: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    // Kafka: DESCRIBE on the cluster.
    let code = if allowed(shard, req, op::DESCRIBE, resource::CLUSTER, CLUSTER_NAME) {
        ErrorCode::None
    } else {
        ErrorCode::ClusterAuthorizationFailed
    };
    ListPartitionReassignmentsResponse::default().with_error_code(code.code())
}
