//! Heartbeat (key 12): keeps a classic member's session alive and tells it
//! when a rebalance started.

use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};

use super::{group_coordinator, Api, Req};
use crate::security::acl::op;
use crate::shard::Shard;

/// Heartbeat, versions 0–4.
pub const API: Api<HeartbeatRequest> = Api::new(ApiKey::Heartbeat, 0, 4);

pub async fn handle(shard: &Shard, req: &Req, body: HeartbeatRequest) -> HeartbeatResponse {
    let code = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Err(e) => e,
        Ok(groups) => {
            groups
                .heartbeat(
                    body.group_id.to_string(),
                    body.member_id.to_string(),
                    body.group_instance_id.map(|s| s.to_string()),
                    body.generation_id,
                )
                .await
        }
    };
    HeartbeatResponse::default().with_error_code(code.code())
}
