//! SyncGroup (key 14): the leader hands out the assignment; every member
//! gets its own once it is stored.

use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

use super::{group_coordinator, str_bytes, Api, Req};
use crate::groups::{SyncArgs, SyncResult};
use crate::security::acl::op;
use crate::shard::Shard;

/// SyncGroup, versions 0–5.
pub const API: Api<SyncGroupRequest> = Api::new(ApiKey::SyncGroup, 0, 5);

pub async fn handle(shard: &Shard, req: &Req, body: SyncGroupRequest) -> SyncGroupResponse {
    let result = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Err(e) => SyncResult::error(e),
        Ok(groups) => {
            groups
                .sync(SyncArgs {
                    group_id: body.group_id.to_string(),
                    member_id: body.member_id.to_string(),
                    instance_id: body.group_instance_id.map(|s| s.to_string()),
                    generation: body.generation_id,
                    protocol_type: body.protocol_type.map(|s| s.to_string()),
                    protocol_name: body.protocol_name.map(|s| s.to_string()),
                    assignments: body
                        .assignments
                        .into_iter()
                        .map(|a| (a.member_id.to_string(), a.assignment))
                        .collect(),
                })
                .await
        }
    };
    SyncGroupResponse::default()
        .with_error_code(result.error.code())
        .with_protocol_type(result.protocol_type.as_deref().map(str_bytes))
        .with_protocol_name(result.protocol_name.as_deref().map(str_bytes))
        .with_assignment(result.assignment)
}
