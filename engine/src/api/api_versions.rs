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
                .with_min_version(a.min)
                .with_max_version(a.max)
        })
        .collect()
}

/// ApiVersions, versions 0–4.
pub const API: Api<ApiVersionsRequest> = Api::new(ApiKey::ApiVersions, 0, 4);

pub async fn handle(_shard: &Shard, _req: &Req, _body: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(table())
}

/// A version newer than served: error 35 in the v0 layout with the table,
/// so the client retries with a version both sides know.
pub fn unsupported(correlation_id: i32) -> Option<Bytes> {
    let resp = ApiVersionsResponse::default()
        .with_error_code(ErrorCode::UnsupportedVersion.code())
        .with_api_keys(table());
    encode(correlation_id, 0, &resp)
}
