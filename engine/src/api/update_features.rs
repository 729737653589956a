//! UpdateFeatures (key 57): rutomq's feature levels are fixed (see
//! [`FEATURES`]); a request that keeps every level is a success that
//! changes nothing, one that would change a level is refused whole with
//! INVALID_UPDATE_VERSION, as Kafka refuses a level its controller does
//! not support.

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{ApiKey, UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::access::allowed;
use super::api_versions::FEATURES;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::{op, resource, CLUSTER_NAME};
use crate::shard::Shard;

/// UpdateFeatures, versions 0–2.
pub const API: Api<UpdateFeaturesRequest> = Api::new(ApiKey::UpdateFeatures, 0, 2);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    // Kafka: ALTER on the cluster.
    if !allowed(shard, req, op::ALTER, resource::CLUSTER, CLUSTER_NAME) {
        return UpdateFeaturesResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
            .with_error_message(Some(str_bytes("Authorization failed.")));
    }
    // All or nothing, as Kafka's controller: the first refusal refuses all.
    for u in &body.feature_updates {
        if let Err((code, why)) = check(req.version, u) {
            tracing::info!(client = %req.client_id(), feature = %u.feature.as_str(),
                level = u.max_version_level, "UpdateFeatures refused: {why}");
            let msg = format!(
                "The update failed for all features since the following feature had an error: {why}"
            );
            return UpdateFeaturesResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&msg)));
        }
    }
    // v0–1 list each feature's (successful) result; v2 none.
    let results = if req.version <= 1 {
        body.feature_updates
            .iter()
            .map(|u| UpdatableFeatureResult::default().with_feature(u.feature.clone()))
            .collect()
    } else {
        Vec::new()
    };
    UpdateFeaturesResponse::default().with_results(results)
}

/// Whether update `u` keeps its feature's level (the only update rutomq
/// can make true), or why not.
fn check(
    version: i16,
    u: &kafka_protocol::messages::update_features_request::FeatureUpdateKey,
) -> Result<(), (ErrorCode, String)> {
    let name = u.feature.as_str();
    let level = u.max_version_level;
    if version >= 1 && !(1..=3).contains(&u.upgrade_type) {
        return Err((
            ErrorCode::InvalidRequest,
            format!("unknown upgrade type {} for feature {name}", u.upgrade_type),
        ));
    }
    if level < 0 {
        return Err((
            ErrorCode::InvalidUpdateVersion,
            format!("A feature version cannot be less than 0 ({name} {level})."),
        ));
    }
    let current = FEATURES
        .iter()
        .find(|f| f.name == name)
        .map_or(0, |f| f.finalized);
    if level != current {
        return Err((
            ErrorCode::InvalidUpdateVersion,
            format!(
                "Invalid update version {level} for feature {name}: rutomq serves it at level \
                 {current} only and changes no feature level"
            ),
        ));
    }
    Ok(())
}
