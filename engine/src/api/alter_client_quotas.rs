//! AlterClientQuotas (key 49): set or remove quota values of client
//! entities (users, client ids, both, IPs; named or `<default>`). Each
//! entry is checked as Kafka's controller checks it; the entries that pass
//! are written in one PostgreSQL transaction (unless `validate_only`) and
//! this agent reloads its copy before answering, so its next request is
//! throttled by the new values; the other agents reload on the
//! `rutomq_quotas` notice. It needs ALTER_CONFIGS on the cluster.

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey};
use rutomq_meta::quota::{QuotaAlterError, QuotaAlteration};

use super::access::cluster_allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::quota::admin::{
    check_value, entity_text, parse_entity, wire_entity, Refusal, WireEntity,
};
use crate::security::acl::op;
use crate::shard::Shard;

/// AlterClientQuotas, versions 0–1 (Kafka 4's).
pub const API: Api<AlterClientQuotasRequest> = Api::new(ApiKey::AlterClientQuotas, 0, 1);

/// One distinct entity of the request and what became of it.
struct Outcome {
    wire: WireEntity,
    result: Result<QuotaAlteration, Refusal>,
}

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let mut outcomes: Vec<Outcome> = Vec::new();
    for entry in &body.entries {
        let wire = wire_entity(
            entry
                .entity
                .iter()
                .map(|e| (e.entity_type.as_str(), e.entity_name.as_deref())),
        );
        let mut ops: Vec<(String, Option<f64>)> = Vec::new();
        let mut duplicate_key = false;
        for o in &entry.ops {
            let key = o.key.to_string();
            if ops.iter().any(|(k, _)| *k == key) {
                duplicate_key = true;
            } else {
                ops.push((key, (!o.remove).then_some(o.value)));
            }
        }
        let same = |w: &WireEntity| w.len() == wire.len() && wire.iter().all(|p| w.contains(p));
        let seen = outcomes.iter().position(|o| same(&o.wire));
        if duplicate_key || seen.is_some() {
            // Kafka answers both with this message (its duplicate-key
            // message is overwritten by it). Kafka still writes an entity's
            // earlier entry while answering this refusal for it; here a
            // refused entity changes nothing.
            let refusal = (
                ErrorCode::InvalidRequest,
                format!("Ignoring duplicate entity {}", entity_text(&wire)),
            );
            match seen {
                Some(i) => outcomes[i].result = Err(refusal),
                None => outcomes.push(Outcome {
                    wire,
                    result: Err(refusal),
                }),
            }
            continue;
        }
        let result = parse_entity(&wire).and_then(|entity| {
            for (key, value) in &ops {
                if let Some(v) = value {
                    check_value(&entity, key, *v)?;
                }
            }
            Ok(QuotaAlteration { entity, ops })
        });
        outcomes.push(Outcome { wire, result });
    }
    if !cluster_allowed(shard, req, op::ALTER_CONFIGS) {
        // Every entry echoed as sent.
        let entries = body
            .entries
            .iter()
            .map(|e| {
                EntryData::default()
                    .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
                    .with_error_message(Some(str_bytes("Cluster authorization failed.")))
                    .with_entity(
                        e.entity
                            .iter()
                            .map(|p| {
                                EntityData::default()
                                    .with_entity_type(p.entity_type.clone())
                                    .with_entity_name(p.entity_name.clone())
                            })
                            .collect(),
                    )
            })
            .collect();
        return AlterClientQuotasResponse::default().with_entries(entries);
    }
    for o in &outcomes {
        if let Err((_, why)) = &o.result {
            tracing::info!(peer = ?req.peer, entity = %entity_text(&o.wire), "AlterClientQuotas refused: {why}");
        }
    }
    let writes: Vec<QuotaAlteration> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok())
        .cloned()
        .collect();
    let mut shared: Option<Refusal> = None;
    if !body.validate_only && !writes.is_empty() {
        let meta = &shard.agent.meta;
        match meta.quota_alter(writes).await {
            Ok(()) => {
                if let Err(e) = shard.agent.quotas.reload(meta).await {
                    tracing::warn!(error = %e, "AlterClientQuotas: stored, but cannot reload the quotas (the refresher will)");
                }
            }
            Err(e @ QuotaAlterError::TooMany) => {
                shared = Some((ErrorCode::InvalidRequest, e.to_string()))
            }
            Err(QuotaAlterError::Meta(e)) => {
                tracing::warn!(error = %e, "AlterClientQuotas: cannot write the quotas");
                shared = Some((ErrorCode::from(&e), e.to_string()));
            }
        }
    }
    let entries = outcomes
        .iter()
        .map(|o| {
            let (code, message) = match (&o.result, &shared) {
                (Err((code, why)), _) | (Ok(_), Some((code, why))) => (*code, Some(str_bytes(why))),
                (Ok(_), None) => (ErrorCode::None, None),
            };
            EntryData::default()
                .with_error_code(code.code())
                .with_error_message(message)
                .with_entity(
                    o.wire
                        .iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(str_bytes(t))
                                .with_entity_name(n.as_deref().map(str_bytes))
                        })
                        .collect(),
                )
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
