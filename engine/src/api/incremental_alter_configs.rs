//! IncrementalAlterConfigs (key 44): SET, DELETE, APPEND and SUBTRACT of
//! topic configs (validated as CreateTopics validates them), broker
//! configs (per agent and the cluster default), group configs and
//! client-metrics subscriptions (`crate::dynamic`), and the agent's log
//! levels (BROKER_LOGGER).

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::config_support::{
    alter_dynamic, alter_topic, config_twice, dynamic_allowed, dynamic_resource, named_twice,
    reload_dynamic, repeated, unserved, Outcome, RESOURCE_TOPIC,
};
use super::{str_bytes, Api, Req};
use crate::dynamic::{
    self, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP,
};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;
use crate::topics::{self, AlterOp};

/// IncrementalAlterConfigs, versions 0–1.
pub const API: Api<IncrementalAlterConfigsRequest> =
    Api::new(ApiKey::IncrementalAlterConfigs, 0, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let twice = repeated(
        body.resources
            .iter()
            .map(|r| (r.resource_type, &r.resource_name)),
    );
    let mut responses = Vec::with_capacity(body.resources.len());
    for r in &body.resources {
        let name = r.resource_name.as_str();
        let (code, msg): Outcome = if twice
            .binary_search(&(r.resource_type, &r.resource_name))
            .is_ok()
        {
            named_twice(name)
        } else {
            match ops(r) {
                Err(outcome) => outcome,
                Ok(ops) => alter(shard, req, r.resource_type, name, body.validate_only, ops).await,
            }
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
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

type Op = (String, AlterOp, Option<String>);

fn borrowed(ops: &[Op]) -> Vec<dynamic::Op<'_>> {
    ops.iter()
        .map(|(n, o, v)| (n.as_str(), *o, v.as_deref()))
        .collect()
}

/// One resource's operations, applied as its type wants.
async fn alter(
    shard: &Shard,
    req: &Req,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    ops: Vec<Op>,
) -> Outcome {
    match resource_type {
        RESOURCE_TOPIC => {
            alter_topic(shard, req, name, validate_only, move |configs| {
                topics::apply_ops(configs, &borrowed(&ops))
            })
            .await
        }
        RESOURCE_BROKER | RESOURCE_GROUP | RESOURCE_CLIENT_METRICS => {
            let default = name.is_empty();
            let read_only = shard.agent.cfg.read_only.clone();
            alter_dynamic(
                shard,
                req,
                resource_type,
                name,
                validate_only,
                move |configs| {
                    dynamic::alter(resource_type, default, configs, &borrowed(&ops), &read_only)
                },
            )
            .await
        }
        RESOURCE_BROKER_LOGGER => {
            let checked = dynamic_allowed(shard, req, op::ALTER_CONFIGS, resource_type, name)
                .and_then(|()| dynamic_resource(shard, resource_type, name));
            if let Err(refused) = checked {
                return refused;
            }
            match crate::logging::alter(&borrowed(&ops), validate_only) {
                Ok(()) => (ErrorCode::None, None),
                Err(r) => {
                    tracing::info!(reason = %r.message, client = %req.client_id(), "log level change refused");
                    (r.code, Some(r.message))
                }
            }
        }
        _ => unserved(req, resource_type, name),
    }
}

/// The resource's operations, or why the request is malformed (a config
/// named twice, an unknown operation code).
fn ops(
    r: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
) -> Result<Vec<Op>, Outcome> {
    let twice = repeated(r.configs.iter().map(|c| c.name.as_str()));
    if let Some(n) = twice.first() {
        return Err(config_twice(n));
    }
    r.configs
        .iter()
        .map(|c| {
            let op = AlterOp::from_code(c.config_operation).ok_or_else(|| {
                let msg = format!(
                    "unknown config operation {} for {:?}",
                    c.config_operation,
                    c.name.as_str()
                );
                (ErrorCode::InvalidRequest, Some(msg))
            })?;
            Ok((
                c.name.as_str().to_owned(),
                op,
                c.value.as_ref().map(|v| v.as_str().to_owned()),
            ))
        })
        .collect()
}
