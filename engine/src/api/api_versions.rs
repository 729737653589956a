//! ApiVersions (key 18): the table is `APIS`, nothing else.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{Api, encode, Req, APIS};
use crate::error::ErrorCode;
use crate::shard::Shard;

fn table() -> Vec<ApiVersion> {
    APIS.iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
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
    ApiVersionsResponse::default().with_api_keys(table())
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
    use super::valid_software;

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
