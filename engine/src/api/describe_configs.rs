//! DescribeConfigs (key 32) for topics; broker configs are not served.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};

use super::{Api, str_bytes, Req};
use crate::error::ErrorCode;
use crate::shard::Shard;
use crate::topics::TOPIC_CONFIGS;

const RESOURCE_TOPIC: i8 = 2;
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

/// DescribeConfigs, versions 1–4.
pub const API: Api<DescribeConfigsRequest> = Api::new(ApiKey::DescribeConfigs, 1, 4);

pub async fn handle(
    shard: &Shard,
    _req: &Req,
    body: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut results = Vec::new();
    for r in body.resources {
        let result = DescribeConfigsResult::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        if r.resource_type != RESOURCE_TOPIC {
            results.push(
                result
                    .with_error_code(ErrorCode::InvalidRequest.code())
                    .with_error_message(Some(str_bytes("only topic configs can be described"))),
            );
            continue;
        }
        let topic = match shard.topics.by_name(r.resource_name.as_str()).await {
            Ok(Some(t)) => t,
            Ok(None) => {
                results.push(result.with_error_code(ErrorCode::UnknownTopicOrPartition.code()));
                continue;
            }
            Err(code) => {
                results.push(result.with_error_code(code.code()));
                continue;
            }
        };
        let wanted = |k: &str| {
            r.configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|w| w.as_str() == k))
        };
        let configs = TOPIC_CONFIGS
            .iter()
            .filter(|(k, _)| wanted(k))
            .map(|(k, d)| {
                let set = topic.configs.iter().find(|(n, _)| n == k);
                DescribeConfigsResourceResult::default()
                    .with_name(str_bytes(k))
                    .with_value(Some(str_bytes(set.map_or(*d, |(_, v)| v.as_str()))))
                    .with_config_source(if set.is_some() {
                        SOURCE_TOPIC
                    } else {
                        SOURCE_DEFAULT
                    })
            })
            .collect();
        results.push(result.with_configs(configs));
    }
    DescribeConfigsResponse::default().with_results(results)
}
