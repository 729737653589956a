//! DeleteAcls (key 31): removes every ACL each filter matches. The agent's
//! copy is reloaded first (so the match is against what PostgreSQL holds
//! now), the matched bindings are deleted in one PostgreSQL transaction,
//! and each filter is answered with the bindings it removed. It needs
//! ALTER on the cluster. Without an authorizer every filter is answered
//! SECURITY_DISABLED, as an Apache Kafka broker without
//! `authorizer.class.name` does.

use std::collections::BTreeSet;

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};

use super::access::acl_admin;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, AclBinding, AclFilter};
use crate::shard::Shard;

/// DeleteAcls, versions 1–3 (Kafka 4 dropped 0).
pub const API: Api<DeleteAclsRequest> = Api::new(ApiKey::DeleteAcls, 1, 3);

pub async fn handle(shard: &Shard, req: &Req, body: DeleteAclsRequest) -> DeleteAclsResponse {
    let answer_all = |code: ErrorCode, message: &str| {
        DeleteAclsResponse::default()
            .with_filter_results(body.filters.iter().map(|_| failed(code, message)).collect())
    };
    let authorizer = match acl_admin(shard, req, op::ALTER) {
        Ok(a) => a,
        Err((code, message)) => return answer_all(code, message),
    };
    let meta = &shard.agent.meta;
    let acls = match authorizer.reload(meta).await {
        Ok(acls) => acls,
        Err(e) => {
            tracing::warn!(error = %e, "DeleteAcls failed: cannot read the ACLs");
            return answer_all(ErrorCode::from(&e), &e.to_string());
        }
    };
    // Per filter: why it is refused, or the bindings it matches.
    let matched: Vec<Result<Vec<AclBinding>, String>> = body
        .filters
        .iter()
        .map(|f| {
            let filter = AclFilter {
                resource_type: f.resource_type_filter,
                resource_name: f.resource_name_filter.as_ref().map(|s| s.to_string()),
                pattern_type: f.pattern_type_filter,
                principal: f.principal_filter.as_ref().map(|s| s.to_string()),
                host: f.host_filter.as_ref().map(|s| s.to_string()),
                operation: f.operation,
                permission: f.permission_type,
            };
            match filter.invalid() {
                Some(why) => Err(why),
                None => {
                    let mut list: Vec<AclBinding> = acls.matching(&filter).cloned().collect();
                    list.sort();
                    Ok(list)
                }
            }
        })
        .collect();
    let doomed: Vec<AclBinding> = matched
        .iter()
        .filter_map(|m| m.as_ref().ok())
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let removed: BTreeSet<AclBinding> = if doomed.is_empty() {
        BTreeSet::new()
    } else {
        match meta.acl_delete(doomed.clone()).await {
            Ok(found) => doomed
                .into_iter()
                .zip(found)
                .filter_map(|(b, was)| was.then_some(b))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "DeleteAcls failed");
                return answer_all(ErrorCode::from(&e), &e.to_string());
            }
        }
    };
    if !removed.is_empty() {
        if let Err(e) = authorizer.reload(meta).await {
            tracing::warn!(error = %e, "ACLs deleted; reloading them failed (the next notice or refresh will)");
        }
        for b in &removed {
            tracing::info!(peer = ?req.peer, acl = ?b, "ACL deleted");
        }
    }
    DeleteAclsResponse::default().with_filter_results(
        matched
            .into_iter()
            .map(|m| match m {
                Err(why) => {
                    tracing::info!(peer = ?req.peer, "DeleteAcls: filter refused: {why}");
                    failed(ErrorCode::InvalidRequest, &why)
                }
                Ok(list) => DeleteAclsFilterResult::default().with_matching_acls(
                    list.iter()
                        .filter(|b| removed.contains(b))
                        .map(|b| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(b.resource_type)
                                .with_resource_name(str_bytes(&b.resource_name))
                                .with_pattern_type(b.pattern_type)
                                .with_principal(str_bytes(&b.principal))
                                .with_host(str_bytes(&b.host))
                                .with_operation(b.operation)
                                .with_permission_type(b.permission)
                        })
                        .collect(),
                ),
            })
            .collect(),
    )
}

fn failed(code: ErrorCode, message: &str) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(code.code())
        .with_error_message(Some(str_bytes(message)))
}
