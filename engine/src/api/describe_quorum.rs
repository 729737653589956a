//! DescribeQuorum (key 55). rutomq has no KRaft metadata quorum to
//! describe: its ordered metadata is in PostgreSQL, replicated (or not) as
//! PostgreSQL is. A made-up one-voter quorum would be a fake success, so
//! the request is answered with INVALID_REQUEST and why (Kafka's tools
//! print the message and exit 1 at once; a retriable code would make them
//! wait out their timeout).

use kafka_protocol::messages::{ApiKey, DescribeQuorumRequest, DescribeQuorumResponse};

use super::access::allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// DescribeQuorum, versions 0–2.
pub const API: Api<DescribeQuorumRequest> = Api::new(ApiKey::DescribeQuorum, 0, 2);

/// Why no quorum is described.
pub const NO_QUORUM: &str = "rutomq has no KRaft metadata quorum: its ordered metadata is in \
PostgreSQL, whose replication is PostgreSQL's own";

pub async fn handle(
    shard: &Shard,
    req: &Req,
    _body: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    // Kafka: DESCRIBE on the cluster.
    if !allowed(shard, req, op::DESCRIBE, resource::CLUSTER, CLUSTER_NAME) {
        return DescribeQuorumResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code());
    }
    tracing::info!(client = %req.client_id(), "DescribeQuorum refused: {NO_QUORUM}");
    DescribeQuorumResponse::default()
        .with_error_code(ErrorCode::InvalidRequest.code())
        // The message exists from v2.
        .with_error_message((req.version >= 2).then(|| str_bytes(NO_QUORUM)))
}
