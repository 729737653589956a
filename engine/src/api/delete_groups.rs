//! DeleteGroups (key 42): removes empty groups and their committed offsets.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};

use super::{group_coordinator, Api, Req};
use crate::security::acl::op;
use crate::shard::Shard;

/// DeleteGroups, versions 0–2.
pub const API: Api<DeleteGroupsRequest> = Api::new(ApiKey::DeleteGroups, 0, 2);

pub async fn handle(shard: &Shard, req: &Req, body: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(body.groups_names.len());
    for group_id in body.groups_names {
        let code = match group_coordinator(shard, req, op::DELETE, &group_id) {
            Err(e) => e,
            Ok(groups) => groups.delete(group_id.to_string()).await,
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code.code()),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
