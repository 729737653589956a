//! DeleteAcls (key 31). No authorizer is configured on this agent (the
//! authorizer is not built yet): every filter is answered
//! SECURITY_DISABLED, as an Apache Kafka broker without
//! `authorizer.class.name` does.

use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};

use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;

/// DeleteAcls, versions 1–3 (Kafka 4 dropped 0).
pub const API: Api<DeleteAclsRequest> = Api::new(ApiKey::DeleteAcls, 1, 3);

pub async fn handle(_shard: &Shard, req: &Req, body: DeleteAclsRequest) -> DeleteAclsResponse {
    tracing::info!(peer = ?req.peer, filters = body.filters.len(),
        "DeleteAcls refused: no authorizer is configured");
    DeleteAclsResponse::default().with_filter_results(
        body.filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(ErrorCode::SecurityDisabled.code())
                    .with_error_message(Some(str_bytes(super::NO_AUTHORIZER)))
            })
            .collect(),
    )
}
