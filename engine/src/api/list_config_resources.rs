//! ListConfigResources (key 74, KIP-1142; version 0 was
//! ListClientMetricsResources): the resources configs can be described
//! for, by type — topics, agents (BROKER and BROKER_LOGGER), groups
//! (those known to the coordinators and those with configs set) and
//! client-metrics subscriptions. Version 0 lists subscriptions only.

use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ApiKey, ListConfigResourcesRequest, ListConfigResourcesResponse};

use super::access::cluster_allowed;
use super::{str_bytes, Api, Req};
use crate::dynamic::{
    RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
    RESOURCE_TOPIC,
};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;

/// ListConfigResources, versions 0–1.
pub const API: Api<ListConfigResourcesRequest> = Api::new(ApiKey::ListConfigResources, 0, 1);

/// The types listed, in Kafka's order.
const TYPES: &[i8] = &[
    RESOURCE_TOPIC,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
];

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    let fail =
        |code: ErrorCode| ListConfigResourcesResponse::default().with_error_code(code.code());
    // Kafka: DESCRIBE_CONFIGS on the cluster.
    if !cluster_allowed(shard, req, op::DESCRIBE_CONFIGS) {
        return fail(ErrorCode::ClusterAuthorizationFailed);
    }
    let types: Vec<i8> = if req.version == 0 {
        vec![RESOURCE_CLIENT_METRICS]
    } else if body.resource_types.is_empty() {
        TYPES.to_vec()
    } else {
        body.resource_types.clone()
    };
    if let Some(t) = types.iter().find(|t| !TYPES.contains(t)) {
        tracing::info!(client = %req.client_id(), resource_type = t,
            "ListConfigResources refused: no configs of this resource type");
        return fail(ErrorCode::UnsupportedVersion);
    }
    let configs = shard.agent.dynamic.copy.get();
    let mut out = Vec::new();
    for &t in TYPES.iter().filter(|t| types.contains(t)) {
        let names: Vec<String> = match t {
            RESOURCE_TOPIC => match shard.agent.meta.load_topics(None).await {
                Ok(topics) => topics.into_iter().map(|t| t.name).collect(),
                Err(e) => return fail(ErrorCode::from(&e)),
            },
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => shard
                .agent
                .live_agents()
                .iter()
                .map(|a| a.agent_id.to_string())
                .collect(),
            RESOURCE_CLIENT_METRICS => configs.resources(t).map(str::to_owned).collect(),
            _ => {
                let mut groups: Vec<String> = match shard.agent.groups().list().await {
                    Ok(l) => l.into_iter().map(|(id, ..)| id).collect(),
                    Err(code) => return fail(code),
                };
                groups.extend(configs.resources(t).map(str::to_owned));
                groups.sort_unstable();
                groups.dedup();
                groups
            }
        };
        out.extend(names.iter().map(|n| {
            ConfigResource::default()
                .with_resource_type(t)
                .with_resource_name(str_bytes(n))
        }));
    }
    ListConfigResourcesResponse::default().with_config_resources(out)
}
