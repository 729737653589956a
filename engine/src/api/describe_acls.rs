//! DescribeAcls (key 29): the ACLs a filter matches, from the agent's copy
//! (at most `ACLS_REFRESH` old, fresh after a change made here), grouped by
//! resource as Kafka answers. It needs DESCRIBE on the cluster. Without an
//! authorizer it answers SECURITY_DISABLED, as an Apache Kafka broker
//! without `authorizer.class.name` does.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};

use super::access::acl_admin;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, AclFilter};
use crate::shard::Shard;

/// DescribeAcls, versions 1–3 (Kafka 4 dropped 0).
pub const API: Api<DescribeAclsRequest> = Api::new(ApiKey::DescribeAcls, 1, 3);

pub async fn handle(shard: &Shard, req: &Req, body: DescribeAclsRequest) -> DescribeAclsResponse {
    let fail = |code: ErrorCode, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(message)))
    };
    let authorizer = match acl_admin(shard, req, op::DESCRIBE) {
        Ok(a) => a,
        Err((code, message)) => return fail(code, message),
    };
    let filter = AclFilter {
        resource_type: body.resource_type_filter,
        resource_name: body.resource_name_filter.map(|s| s.to_string()),
        pattern_type: body.pattern_type_filter,
        principal: body.principal_filter.map(|s| s.to_string()),
        host: body.host_filter.map(|s| s.to_string()),
        operation: body.operation,
        permission: body.permission_type,
    };
    if let Some(why) = filter.invalid() {
        tracing::info!(peer = ?req.peer, "DescribeAcls refused: {why}");
        return fail(ErrorCode::InvalidRequest, &why);
    }
    let acls = authorizer.acls();
    let mut resources: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
    let mut matched: Vec<_> = acls.matching(&filter).collect();
    matched.sort();
    for b in matched {
        resources
            .entry((b.resource_type, b.resource_name.as_str(), b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(&b.principal))
                    .with_host(str_bytes(&b.host))
                    .with_operation(b.operation)
                    .with_permission_type(b.permission),
            );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|((resource_type, name, pattern_type), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(str_bytes(name))
                    .with_pattern_type(pattern_type)
                    .with_acls(acls)
            })
            .collect(),
    )
}
