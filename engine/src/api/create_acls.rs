//! CreateAcls (key 30). No authorizer is configured on this agent (the
//! authorizer is not built yet): every creation is refused with
//! SECURITY_DISABLED, as an Apache Kafka broker without
//! `authorizer.class.name` does; nothing is stored.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};

use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;

/// CreateAcls, versions 1–3 (Kafka 4 dropped 0).
pub const API: Api<CreateAclsRequest> = Api::new(ApiKey::CreateAcls, 1, 3);

pub async fn handle(_shard: &Shard, req: &Req, body: CreateAclsRequest) -> CreateAclsResponse {
    tracing::info!(peer = ?req.peer, acls = body.creations.len(),
        "CreateAcls refused: no authorizer is configured");
    CreateAclsResponse::default().with_results(
        body.creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(ErrorCode::SecurityDisabled.code())
                    .with_error_message(Some(str_bytes(super::NO_AUTHORIZER)))
            })
            .collect(),
    )
}
