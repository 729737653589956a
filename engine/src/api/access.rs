//! What a request's principal may do: the handlers' one way to ask the
//! shard's ACL view. Without an authorizer everything is allowed (and
//! `authorized_operations` reports every operation, as Kafka does).

use super::Req;
use crate::error::ErrorCode;
use crate::security::acl::{
    op, operation_bits, reported_operations, resource, AclSet, AuthorizerConfig, CLUSTER_NAME,
};
use crate::security::authorizer::Authorizer;
use crate::shard::Shard;

/// Runs `f` with the ACLs, their settings, the principal and its host;
/// `None` without an authorizer.
fn decide<T>(
    shard: &Shard,
    req: &Req,
    f: impl FnOnce(&AclSet, &AuthorizerConfig, &str, &str) -> T,
) -> Option<T> {
    let acls = shard.acls.as_ref()?;
    Some(req.with_principal(|principal, host| acls.with(|set, cfg| f(set, cfg, principal, host))))
}

/// Whether the principal may do `operation` on (`resource_type`, `name`);
/// a refusal is counted and logged (rate-limited).
pub fn allowed(shard: &Shard, req: &Req, operation: i8, resource_type: i8, name: &str) -> bool {
    decide(shard, req, |set, cfg, principal, host| {
        let ok = set.authorize(cfg, principal, host, operation, resource_type, name);
        if !ok {
            shard.denied(principal, host, operation, resource_type, name, req.key);
        }
        ok
    })
    .unwrap_or(true)
}

/// As [`allowed`], without counting or logging a refusal: for resources
/// left out of a listing (Kafka's `logIfDenied = false`).
pub fn visible(shard: &Shard, req: &Req, operation: i8, resource_type: i8, name: &str) -> bool {
    decide(shard, req, |set, cfg, principal, host| {
        set.authorize(cfg, principal, host, operation, resource_type, name)
    })
    .unwrap_or(true)
}

/// The authorizer an ACL API (CreateAcls, DescribeAcls, DeleteAcls) works
/// against, once the principal may do `operation` on the cluster; else the
/// error the whole request is answered with: SECURITY_DISABLED without an
/// authorizer (as Kafka without `authorizer.class.name`, logged),
/// CLUSTER_AUTHORIZATION_FAILED.
pub fn acl_admin<'a>(
    shard: &'a Shard,
    req: &Req,
    operation: i8,
) -> Result<&'a std::sync::Arc<Authorizer>, (ErrorCode, &'static str)> {
    let Some(authorizer) = &shard.agent.authorizer else {
        tracing::info!(peer = ?req.peer, api = ?req.key, "refused: no authorizer is configured");
        return Err((ErrorCode::SecurityDisabled, super::NO_AUTHORIZER));
    };
    if !cluster_allowed(shard, req, operation) {
        return Err((
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ));
    }
    Ok(authorizer)
}

/// Whether the principal may do `operation` on the cluster.
pub fn cluster_allowed(shard: &Shard, req: &Req, operation: i8) -> bool {
    allowed(shard, req, operation, resource::CLUSTER, CLUSTER_NAME)
}

/// Whether the principal may do `operation` on some resource of
/// `resource_type` (WRITE on any topic standing for IDEMPOTENT_WRITE).
pub fn allowed_on_some(shard: &Shard, req: &Req, operation: i8, resource_type: i8) -> bool {
    decide(shard, req, |set, cfg, principal, host| {
        set.authorize_any(cfg, principal, host, operation, resource_type)
    })
    .unwrap_or(true)
}

/// The `authorized_operations` field for (`resource_type`, `name`): the
/// bits of the operations allowed when `asked`, Kafka's "not asked"
/// `i32::MIN` otherwise.
pub fn operations(shard: &Shard, req: &Req, asked: bool, resource_type: i8, name: &str) -> i32 {
    if !asked {
        return i32::MIN;
    }
    // Kafka reports nothing (0) to a principal that may not describe it.
    decide(shard, req, |set, cfg, principal, host| {
        if set.authorize(cfg, principal, host, op::DESCRIBE, resource_type, name) {
            set.authorized_operations(cfg, principal, host, resource_type, name)
        } else {
            0
        }
    })
    .unwrap_or_else(|| operation_bits(reported_operations(resource_type).iter().copied()))
}
