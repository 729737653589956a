//! ApiVersions (key 18): the table is `APIS`, nothing else.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{encode, str_bytes, Api, Req, APIS};
use crate::error::ErrorCode;
use crate::shard::Shard;

/// A feature flag as ApiVersions reports it (KIP-584): the levels the
/// agent supports and the level in force in the cluster.
pub struct Feature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    pub finalized: i16,
}

/// rutomq's features, at fixed levels (UpdateFeatures changes none). Kafka
/// lists no feature whose level is 0, and clients take an unlisted one at
/// 0; so listed are only `group.version` 1 (KIP-848's consumer groups),
/// `share.version` 1 (KIP-932's share groups) and `streams.version` 1
/// (KIP-1071's streams groups); Kafka's own clients check neither of the
/// last two, tools show them. Left at 0: `transaction.version` (at 2,
/// KIP-890 part 2, Java 4.x and franz-go producers would drop
/// AddPartitionsToTxn and expect an epoch bump per transaction, which
/// rutomq does not serve yet), `eligible.leader.replicas.version` (no replicas), `kraft.version` and
/// `metadata.version` (no KRaft: the metadata is in PostgreSQL).
pub const FEATURES: &[Feature] = &[
    Feature {
        name: "group.version",
        min: 0,
        max: 1,
        finalized: 1,
    },
    Feature {
        name: "share.version",
        min: 0,
        max: 1,
        finalized: 1,
    },
    Feature {
        name: "streams.version",
        min: 0,
        max: 1,
        finalized: 1,
    },
];

/// The finalized features' epoch: they never change, so one epoch (not
/// -1, which clients read as "no finalized features").
pub const FEATURES_EPOCH: i64 = 0;

/// The features part of a response at `version` (from v3; supported
/// features with level 0 in their range are left out before v4, as Kafka
/// leaves them out for clients that cannot parse them).
fn with_features(resp: ApiVersionsResponse, version: i16) -> ApiVersionsResponse {
    if version < 3 {
        return resp;
    }
    let supported = FEATURES
        .iter()
        .filter(|f| version >= 4 || f.min > 0)
        .map(|f| {
            SupportedFeatureKey::default()
                .with_name(str_bytes(f.name))
                .with_min_version(f.min)
                .with_max_version(f.max)
        })
        .collect();
    let finalized = FEATURES
        .iter()
        .map(|f| {
            FinalizedFeatureKey::default()
                .with_name(str_bytes(f.name))
                .with_min_version_level(f.finalized)
                .with_max_version_level(f.finalized)
        })
        .collect();
    resp.with_supported_features(supported)
        .with_finalized_features(finalized)
        .with_finalized_features_epoch(FEATURES_EPOCH)
}

fn table() -> Vec<ApiVersion> {
    APIS.iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key.0)
                .with_min_version(a.advertised_min)
                .with_max_version(a.max)
        })
        .collect()
}

/// ApiVersions, versions 0–4.
pub const API: Api<ApiVersionsRequest> = Api::new(ApiKey::ApiVersions, 0, 4);

pub async fn handle(_shard: &Shard, req: &Req, body: ApiVersionsRequest) -> ApiVersionsResponse {
    // v3+: the client names its software as Kafka's pattern allows, or the
    // request is invalid (answered without the table, as Kafka does).
    let (name, version) = (&body.client_software_name, &body.client_software_version);
    if req.version >= 3 && !(valid_software(name) && valid_software(version)) {
        tracing::info!(client = %req.client_id(), software = %name.as_str(), version = %version.as_str(),
            "ApiVersions refused: client software name or version not of [a-zA-Z0-9][a-zA-Z0-9.-]*[a-zA-Z0-9]");
        return ApiVersionsResponse::default().with_error_code(ErrorCode::InvalidRequest.code());
    }
    if req.version >= 3 {
        if let Some(conn) = &req.conn {
            *conn.software.borrow_mut() = Some((name.to_string(), version.to_string()));
        }
    }
    with_features(
        ApiVersionsResponse::default().with_api_keys(table()),
        req.version,
    )
}

/// Kafka's pattern for the client software name and version: letters,
/// digits, '.' and '-', starting and ending with a letter or digit.
fn valid_software(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || *c == b'.' || *c == b'-')
}

/// A version newer than served: error 35 in the v0 layout with the table,
/// so the client retries with a version both sides know.
pub fn unsupported(correlation_id: i32) -> Option<Bytes> {
    let resp = ApiVersionsResponse::default()
        .with_error_code(ErrorCode::UnsupportedVersion.code())
        .with_api_keys(table());
    encode(correlation_id, 0, &resp)
}

#[cfg(test)]
mod tests {
    use super::{table, valid_software, APIS};

    #[test]
    fn api_versions_lists_the_handler_table() {
        let listed: Vec<(i16, i16, i16)> = table()
            .iter()
            .map(|v| (v.api_key, v.min_version, v.max_version))
            .collect();
        let served: Vec<(i16, i16, i16)> = APIS
            .iter()
            .map(|a| (a.key.0, a.advertised_min, a.max))
            .collect();
        assert_eq!(listed, served);
    }

    #[test]
    fn software_names_follow_kafkas_pattern() {
        for ok in ["a", "librdkafka", "2.10.0", "apache-kafka-java", "x-1.2"] {
            assert!(valid_software(ok), "{ok}");
        }
        for bad in ["", "-a", "a.", "bad name", "ü", "a_b"] {
            assert!(!valid_software(bad), "{bad}");
        }
    }
}
