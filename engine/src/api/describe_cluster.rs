//! DescribeCluster (key 60): the live agents.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::access::operations;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{resource, CLUSTER_NAME};
use crate::shard::Shard;

/// DescribeCluster, versions 0–2.
pub const API: Api<DescribeClusterRequest> = Api::new(ApiKey::DescribeCluster, 0, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // endpoint_type 2 (controllers) is for KRaft controllers, which rutomq has none of.
    if body.endpoint_type == 2 {
        return DescribeClusterResponse::default()
            .with_error_code(ErrorCode::UnsupportedVersion.code())
            .with_error_message(Some(str_bytes("rutomq has no controller endpoints")))
            .with_endpoint_type(body.endpoint_type);
    }
    let listener = req.listener_name(shard);
    let agents = shard.agent.live_agents();
    let controller = agents
        .iter()
        .map(|a| a.agent_id)
        .min()
        .unwrap_or(shard.agent.agent_id);
    DescribeClusterResponse::default()
        .with_cluster_authorized_operations(operations(
            shard,
            req,
            body.include_cluster_authorized_operations,
            resource::CLUSTER,
            CLUSTER_NAME,
        ))
        .with_cluster_id(str_bytes(&shard.agent.cluster_id))
        .with_controller_id(BrokerId(controller))
        .with_endpoint_type(body.endpoint_type)
        .with_brokers(
            agents
                .iter()
                .filter_map(|a| {
                    let (host, port) = a.endpoint(listener)?;
                    Some(
                        DescribeClusterBroker::default()
                            .with_broker_id(BrokerId(a.agent_id))
                            .with_host(str_bytes(host))
                            .with_port(port)
                            .with_rack(a.rack.as_deref().map(str_bytes)),
                    )
                })
                .collect(),
        )
}
