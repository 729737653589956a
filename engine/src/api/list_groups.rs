//! ListGroups (key 16): the groups this agent coordinates (clients ask every
//! agent and merge), filtered by state (v4+) and type (v5+).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

use super::access::visible;
use super::{str_bytes, Api, Req};
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// ListGroups, versions 0–5.
pub const API: Api<ListGroupsRequest> = Api::new(ApiKey::ListGroups, 0, 5);

pub async fn handle(shard: &Shard, req: &Req, body: ListGroupsRequest) -> ListGroupsResponse {
    let listed = match shard.agent.groups().list().await {
        Err(e) => return ListGroupsResponse::default().with_error_code(e.code()),
        Ok(l) => l,
    };
    // Kafka: every group for DESCRIBE on the cluster, else those the
    // principal may describe.
    let all = visible(shard, req, op::DESCRIBE, resource::CLUSTER, CLUSTER_NAME);
    let wanted = |filter: &[kafka_protocol::protocol::StrBytes], v: &str| {
        filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(v))
    };
    ListGroupsResponse::default().with_groups(
        listed
            .into_iter()
            .filter(|(_, _, state, kind)| {
                wanted(&body.states_filter, state) && wanted(&body.types_filter, kind)
            })
            .filter(|(id, ..)| all || visible(shard, req, op::DESCRIBE, resource::GROUP, id))
            .map(|(id, protocol_type, state, kind)| {
                ListedGroup::default()
                    .with_group_id(GroupId(str_bytes(&id)))
                    .with_protocol_type(str_bytes(&protocol_type))
                    .with_group_state(str_bytes(&state))
                    .with_group_type(str_bytes(&kind))
            })
            .collect(),
    )
}
