//! JoinGroup (key 11): a member joins a classic group and waits until the
//! rebalance completes (the coordinator answers when the join phase ends).

use std::time::Duration;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};

use super::{group_coordinator, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::groups::{JoinArgs, JoinResult};
use crate::security::acl::op;
use crate::shard::Shard;

/// JoinGroup, versions 0–9.
pub const API: Api<JoinGroupRequest> = Api::new(ApiKey::JoinGroup, 0, 9);

pub async fn handle(shard: &Shard, req: &Req, body: JoinGroupRequest) -> JoinGroupResponse {
    let result = join(shard, req, body).await;
    let mut resp = JoinGroupResponse::default()
        .with_error_code(result.error.code())
        .with_generation_id(result.generation)
        .with_protocol_type(result.protocol_type.as_deref().map(str_bytes))
        .with_leader(str_bytes(&result.leader))
        // skip_assignment exists from v9; older leaders assign again and
        // their SyncGroup in a Stable group changes nothing.
        .with_skip_assignment(result.skip_assignment && req.version >= 9)
        .with_member_id(str_bytes(&result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(&m.member_id))
                        .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                        .with_metadata(m.metadata)
                })
                .collect(),
        );
    // The protocol name is nullable from v7 only.
    resp.protocol_name = match (result.protocol_name, req.version >= 7) {
        (Some(p), _) => Some(str_bytes(&p)),
        (None, true) => None,
        (None, false) => Some(str_bytes("")),
    };
    resp
}

async fn join(shard: &Shard, req: &Req, body: JoinGroupRequest) -> JoinResult {
    let member_id = body.member_id.to_string();
    let groups = match group_coordinator(shard, req, op::READ, &body.group_id) {
        Ok(g) => g,
        Err(e) => return JoinResult::error(e, &member_id),
    };
    let session = Duration::from_millis(body.session_timeout_ms.max(0) as u64);
    if body.session_timeout_ms < 0
        || session < groups.cfg.session_timeout_min
        || session > groups.cfg.session_timeout_max
    {
        return JoinResult::error(ErrorCode::InvalidSessionTimeout, &member_id);
    }
    // Stored as PostgreSQL text, which cannot hold NUL.
    let nul = |s: &str| s.contains('\0');
    if body.group_instance_id.as_deref().is_some_and(nul)
        || nul(&body.protocol_type)
        || body.protocols.iter().any(|p| nul(&p.name))
    {
        return JoinResult::error(ErrorCode::InvalidRequest, &member_id);
    }
    // v0 has no rebalance timeout: the session timeout serves as both.
    let rebalance = if req.version == 0 || body.rebalance_timeout_ms <= 0 {
        session
    } else {
        Duration::from_millis(body.rebalance_timeout_ms as u64)
    };
    if let Some(reason) = &body.reason {
        tracing::debug!(group = %body.group_id.0, member = %member_id, %reason, "join");
    }
    groups
        .join(JoinArgs {
            group_id: body.group_id.to_string(),
            member_id,
            instance_id: body.group_instance_id.map(|s| s.to_string()),
            client_id: req.client_id(),
            client_host: req.client_host(),
            session_timeout: session,
            rebalance_timeout: rebalance,
            protocol_type: body.protocol_type.to_string(),
            protocols: body
                .protocols
                .into_iter()
                .map(|p| (p.name.to_string(), p.metadata))
                .collect(),
            require_known_member_id: req.version >= 4,
        })
        .await
}
