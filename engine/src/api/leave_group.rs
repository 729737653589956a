//! LeaveGroup (key 13): members leave a classic group (one per request up
//! to v2, a batch from v3), which rebalances at once.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use super::{group_coordinator, Api, Req};
use crate::groups::LeaveMember;
use crate::security::acl::op;
use crate::shard::Shard;

/// LeaveGroup, versions 0–5.
pub const API: Api<LeaveGroupRequest> = Api::new(ApiKey::LeaveGroup, 0, 5);

pub async fn handle(shard: &Shard, req: &Req, body: LeaveGroupRequest) -> LeaveGroupResponse {
    let members: Vec<LeaveMember> = if req.version <= 2 {
        vec![LeaveMember {
            member_id: body.member_id.to_string(),
            instance_id: None,
            reason: None,
        }]
    } else {
        body.members
            .iter()
            .map(|m| LeaveMember {
                member_id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
                reason: m.reason.as_ref().map(|s| s.to_string()),
            })
            .collect()
    };
    let result = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Err(e) => Err(e),
        Ok(groups) => groups.leave(body.group_id.to_string(), members).await,
    };
    match result {
        Err(e) => LeaveGroupResponse::default().with_error_code(e.code()),
        Ok(codes) if req.version <= 2 => {
            LeaveGroupResponse::default().with_error_code(codes.first().map_or(0, |c| c.code()))
        }
        Ok(codes) => LeaveGroupResponse::default().with_members(
            body.members
                .into_iter()
                .zip(codes)
                .map(|(m, c)| {
                    MemberResponse::default()
                        .with_member_id(m.member_id)
                        .with_group_instance_id(m.group_instance_id)
                        .with_error_code(c.code())
                })
                .collect(),
        ),
    }
}
