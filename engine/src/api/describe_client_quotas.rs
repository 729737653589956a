//! DescribeClientQuotas (key 48): the stored quota values of the entities
//! a filter matches, from the agent's copy (at most `QUOTAS_REFRESH` old,
//! fresh after a change made on this agent), as Kafka answers from its
//! metadata image. It needs DESCRIBE_CONFIGS on the cluster.

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::access::cluster_allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::quota::admin::{entity_parts, QuotaFilter};
use crate::security::acl::op;
use crate::shard::Shard;

/// DescribeClientQuotas, versions 0–1 (Kafka 4's).
pub const API: Api<DescribeClientQuotasRequest> = Api::new(ApiKey::DescribeClientQuotas, 0, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let fail = |code: ErrorCode, message: &str| {
        DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(message)))
            .with_entries(None)
    };
    if !cluster_allowed(shard, req, op::DESCRIBE_CONFIGS) {
        return fail(
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        );
    }
    let components = body
        .components
        .iter()
        .map(|c| (c.entity_type.as_str(), c.match_type, c._match.as_deref()));
    let filter = match QuotaFilter::parse(components, body.strict) {
        Ok(f) => f,
        Err((code, why)) => {
            tracing::info!(peer = ?req.peer, "DescribeClientQuotas refused: {why}");
            return fail(code, &why);
        }
    };
    let set = shard.agent.quotas.copy.get();
    let mut matched: Vec<_> = set.entities().filter(|(e, _)| filter.matches(e)).collect();
    matched.sort_by(|a, b| a.0.cmp(b.0));
    let entries = matched
        .into_iter()
        .map(|(e, values)| {
            EntryData::default()
                .with_entity(
                    entity_parts(e)
                        .into_iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(str_bytes(t))
                                .with_entity_name(n.map(str_bytes))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| ValueData::default().with_key(str_bytes(k)).with_value(*v))
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default()
        .with_error_message(None)
        .with_entries(Some(entries))
}
