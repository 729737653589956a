//! DescribeAcls (key 29). No authorizer is configured on this agent (the
//! authorizer is not built yet), so it answers SECURITY_DISABLED, as an
//! Apache Kafka broker without `authorizer.class.name` does.

use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};

use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;

/// DescribeAcls, versions 1–3 (Kafka 4 dropped 0).
pub const API: Api<DescribeAclsRequest> = Api::new(ApiKey::DescribeAcls, 1, 3);

pub async fn handle(_shard: &Shard, req: &Req, _body: DescribeAclsRequest) -> DescribeAclsResponse {
    tracing::debug!(peer = ?req.peer, "DescribeAcls refused: no authorizer is configured");
    DescribeAclsResponse::default()
        .with_error_code(ErrorCode::SecurityDisabled.code())
        .with_error_message(Some(str_bytes(super::NO_AUTHORIZER)))
}
