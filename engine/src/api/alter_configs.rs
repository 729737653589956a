//! AlterConfigs (key 33), the legacy form: the configs given replace all
//! of a topic's own (validated as CreateTopics validates them) or of a
//! broker's (one agent's, or the cluster default's), a group's or a
//! client-metrics subscription's.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};

use super::config_support::{
    alter_dynamic, alter_topic, config_twice, named_twice, reload_dynamic, repeated, unserved,
    Outcome, RESOURCE_TOPIC,
};
use super::{str_bytes, Api, Req};
use crate::dynamic::{self, RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP};
use crate::shard::Shard;
use crate::topics;
use crate::topics::AlterOp;

/// AlterConfigs, versions 0–2.
pub const API: Api<AlterConfigsRequest> = Api::new(ApiKey::AlterConfigs, 0, 2);

pub async fn handle(shard: &Shard, req: &Req, body: AlterConfigsRequest) -> AlterConfigsResponse {
    let twice = repeated(
        body.resources
            .iter()
            .map(|r| (r.resource_type, &r.resource_name)),
    );
    let mut responses = Vec::with_capacity(body.resources.len());
    for r in &body.resources {
        let name = r.resource_name.as_str();
        let configs: Vec<(String, Option<String>)> = r
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.as_str().to_owned(),
                    c.value.as_ref().map(|v| v.as_str().to_owned()),
                )
            })
            .collect();
        let (code, msg): Outcome = if twice
            .binary_search(&(r.resource_type, &r.resource_name))
            .is_ok()
        {
            named_twice(name)
        } else if ![
            RESOURCE_TOPIC,
            RESOURCE_BROKER,
            RESOURCE_GROUP,
            RESOURCE_CLIENT_METRICS,
        ]
        .contains(&r.resource_type)
        {
            unserved(req, r.resource_type, name)
        } else if let Some(n) = repeated(configs.iter().map(|(n, _)| n)).first() {
            config_twice(n)
        } else if r.resource_type != RESOURCE_TOPIC {
            let (ty, default) = (r.resource_type, name.is_empty());
            let read_only = shard.agent.cfg.read_only.clone();
            alter_dynamic(shard, req, ty, name, body.validate_only, move |_| {
                let ops: Vec<dynamic::Op> = configs
                    .iter()
                    .filter_map(|(n, v)| Some((n.as_str(), AlterOp::Set, Some(v.as_deref()?))))
                    .collect();
                dynamic::alter(ty, default, Vec::new(), &ops, &read_only)
            })
            .await
        } else {
            alter_topic(shard, req, name, body.validate_only, move |_| {
                replace(configs)
            })
            .await
        };
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code.code())
                .with_error_message(msg.as_deref().map(str_bytes))
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone()),
        );
    }
    if !body.validate_only {
        reload_dynamic(
            shard,
            responses.iter().map(|r| (r.resource_type, r.error_code)),
        )
        .await;
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// The topic's configs become exactly `given`, each validated.
fn replace(given: Vec<(String, Option<String>)>) -> Result<Vec<(String, String)>, String> {
    let mut configs = Vec::with_capacity(given.len());
    for (name, value) in given {
        topics::valid_config(&name, value.as_deref())?;
        configs.extend(value.map(|v| (name, v)));
    }
    topics::valid_together(&configs)?;
    Ok(configs)
}
