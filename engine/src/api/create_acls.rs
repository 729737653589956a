//! CreateAcls (key 30): stores the bindings that pass Kafka's checks in one
//! PostgreSQL transaction (one already stored is left as it is); every
//! agent reloads its copy on the change's notice, this one before
//! answering. It needs ALTER on the cluster. Without an authorizer every
//! creation is refused with SECURITY_DISABLED, as an Apache Kafka broker
//! without `authorizer.class.name` does; nothing is stored.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use rutomq_meta::acl::AclCreateError;

use super::access::acl_admin;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{invalid, op, AclBinding};
use crate::shard::Shard;

/// CreateAcls, versions 1–3 (Kafka 4 dropped 0).
pub const API: Api<CreateAclsRequest> = Api::new(ApiKey::CreateAcls, 1, 3);

pub async fn handle(shard: &Shard, req: &Req, body: CreateAclsRequest) -> CreateAclsResponse {
    let answer_all = |code: ErrorCode, message: &str| {
        CreateAclsResponse::default().with_results(
            body.creations
                .iter()
                .map(|_| result(code, Some(message)))
                .collect(),
        )
    };
    let authorizer = match acl_admin(shard, req, op::ALTER) {
        Ok(a) => a,
        Err((code, message)) => return answer_all(code, message),
    };
    let checked: Vec<Result<AclBinding, String>> = body
        .creations
        .iter()
        .map(|c| {
            let b = AclBinding {
                resource_type: c.resource_type,
                resource_name: c.resource_name.to_string(),
                pattern_type: c.resource_pattern_type,
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: c.operation,
                permission: c.permission_type,
            };
            match invalid(&b) {
                Some(why) => Err(why),
                None => Ok(b),
            }
        })
        .collect();
    let valid: Vec<AclBinding> = checked.iter().filter_map(|c| c.clone().ok()).collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        shard.agent.meta.acl_create(valid.clone()).await
    };
    let shared_error = match &stored {
        Ok(()) => {
            if let Err(e) = authorizer.reload(&shard.agent.meta).await {
                tracing::warn!(error = %e, "ACLs stored; reloading them failed (the next notice or refresh will)");
            }
            for b in &valid {
                tracing::info!(peer = ?req.peer, acl = ?b, "ACL created");
            }
            None
        }
        Err(e @ AclCreateError::TooMany) => Some((ErrorCode::InvalidRequest, e.to_string())),
        Err(AclCreateError::Meta(e)) => Some((ErrorCode::from(e), e.to_string())),
    };
    if let Some((_, why)) = &shared_error {
        tracing::warn!(peer = ?req.peer, acls = valid.len(), "CreateAcls failed: {why}");
    }
    CreateAclsResponse::default().with_results(
        checked
            .iter()
            .map(|c| match (c, &shared_error) {
                (Err(why), _) => {
                    tracing::info!(peer = ?req.peer, "CreateAcls: binding refused: {why}");
                    result(ErrorCode::InvalidRequest, Some(why))
                }
                (Ok(_), Some((code, why))) => result(*code, Some(why)),
                (Ok(_), None) => result(ErrorCode::None, None),
            })
            .collect(),
    )
}

fn result(code: ErrorCode, message: Option<&str>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code.code())
        .with_error_message(message.map(str_bytes))
}
