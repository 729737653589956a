//! DescribeGroups (key 15): state, protocol and members of classic groups
//! this agent coordinates.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};

use super::{group_coordinator, group_operations, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;

/// DescribeGroups, versions 0–6.
pub const API: Api<DescribeGroupsRequest> = Api::new(ApiKey::DescribeGroups, 0, 6);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut out = Vec::with_capacity(body.groups.len());
    for group_id in body.groups {
        let d = match group_coordinator(shard, req, op::DESCRIBE, &group_id) {
            Err(e) => {
                out.push(
                    DescribedGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(e.code()),
                );
                continue;
            }
            Ok(groups) => groups.describe(group_id.to_string()).await,
        };
        let ops = group_operations(
            shard,
            req,
            body.include_authorized_operations,
            &group_id,
            d.error,
        );
        let base = DescribedGroup::default()
            .with_group_id(group_id.clone())
            .with_authorized_operations(ops);
        let mut g = base
            .with_error_code(d.error.code())
            .with_group_state(str_bytes(d.state))
            .with_protocol_type(str_bytes(&d.protocol_type))
            .with_protocol_data(str_bytes(&d.protocol))
            .with_members(
                d.members
                    .into_iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(str_bytes(&m.member_id))
                            .with_group_instance_id(m.instance_id.as_deref().map(str_bytes))
                            .with_client_id(str_bytes(&m.client_id))
                            .with_client_host(str_bytes(&m.client_host))
                            .with_member_metadata(m.metadata)
                            .with_member_assignment(m.assignment)
                    })
                    .collect(),
            );
        if !d.exists && d.error == ErrorCode::None && req.version >= 6 {
            // From v6 an unknown group is an error, not a Dead group.
            g.error_code = ErrorCode::GroupIdNotFound.code();
            g.error_message = Some(str_bytes(&format!("group {} not found", group_id.0)));
        }
        out.push(g);
    }
    DescribeGroupsResponse::default().with_groups(out)
}
