//! The Kafka API registry and dispatch. One module per API; the `APIS`
//! table is both what is dispatched and what ApiVersions advertises, so the
//! two cannot drift apart.

mod api_versions;
mod create_partitions;
mod create_topics;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod fetch;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod produce;

use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::LocalBoxFuture;
use futures::FutureExt;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use rutomq_shards::{Close, Reply};

use crate::shard::Shard;

/// One implemented API and the versions served.
pub struct ApiSpec {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn spec(key: ApiKey, min: i16, max: i16) -> ApiSpec {
    ApiSpec { key, min, max }
}

/// Everything rutomq implements, version by version.
pub const APIS: &[ApiSpec] = &[
    spec(ApiKey::Produce, 3, 13),
    spec(ApiKey::Fetch, 4, 18),
    spec(ApiKey::ListOffsets, 1, 10),
    spec(ApiKey::Metadata, 0, 13),
    spec(ApiKey::ApiVersions, 0, 4),
    spec(ApiKey::CreateTopics, 2, 7),
    spec(ApiKey::DeleteTopics, 1, 6),
    spec(ApiKey::InitProducerId, 0, 5),
    spec(ApiKey::DescribeConfigs, 1, 4),
    spec(ApiKey::CreatePartitions, 0, 3),
    spec(ApiKey::DescribeCluster, 0, 2),
];

pub fn find(key: i16) -> Option<&'static ApiSpec> {
    APIS.iter().find(|a| a.key as i16 == key)
}

/// The shard-side request handler.
pub struct Service {
    pub shard: Rc<Shard>,
}

impl Service {
    pub fn new(shard: Rc<Shard>) -> Rc<Service> {
        Rc::new(Service { shard })
    }
}

/// A parsed request header plus the API it belongs to.
pub struct Req {
    pub key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
}

impl rutomq_shards::Service for Service {
    fn call(self: Rc<Self>, frame: Bytes) -> LocalBoxFuture<'static, Result<Reply, Close>> {
        async move { dispatch(self.shard.clone(), frame).await }.boxed_local()
    }
}

/// Decodes a message, turning a decoder error or panic into a closed
/// connection: the network is hostile input.
fn decode<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, Close> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| T::decode(buf, version))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(Close("malformed request body")),
        Err(_) => Err(Close("request body made the decoder panic")),
    }
}

/// Encodes a response frame: size, response header, body.
pub fn encode<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    resp: &R,
) -> Option<Bytes> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = R::header_version(version);
    let size = header.compute_size(header_version).ok()? + resp.compute_size(version).ok()?;
    let mut buf = BytesMut::with_capacity(4 + size);
    buf.put_i32(size as i32);
    if let Err(e) = header
        .encode(&mut buf, header_version)
        .and_then(|_| resp.encode(&mut buf, version))
    {
        tracing::error!(error = %e, "response encoding failed");
        return None;
    }
    Some(buf.freeze())
}

async fn dispatch(shard: Rc<Shard>, mut frame: Bytes) -> Result<Reply, Close> {
    if frame.len() < 8 {
        return Err(Close("request shorter than its header"));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Some(spec) = find(key) else {
        return Err(Close("unknown or unimplemented API key"));
    };
    let header_version = if spec.key == ApiKey::ApiVersions {
        // Newer-than-known ApiVersions still uses the flexible header.
        if version >= 3 {
            2
        } else {
            1
        }
    } else {
        spec.key.request_header_version(version)
    };
    let header: RequestHeader = decode(&mut frame, header_version)?;
    let corr = header.correlation_id;
    if version < spec.min || version > spec.max {
        if spec.key == ApiKey::ApiVersions {
            return Ok(Reply::Now(api_versions::unsupported(corr)));
        }
        return Err(Close("unsupported API version"));
    }
    let req = Req {
        key: spec.key,
        version,
        header,
    };
    macro_rules! now {
        ($module:ident, $ty:ty) => {{
            let body: $ty = decode(&mut frame, version)?;
            let resp = $module::handle(&shard, &req, body).await;
            Ok(Reply::Now(encode(corr, version, &resp)))
        }};
    }
    match spec.key {
        ApiKey::ApiVersions => now!(api_versions, kafka_protocol::messages::ApiVersionsRequest),
        ApiKey::Metadata => now!(metadata, kafka_protocol::messages::MetadataRequest),
        ApiKey::CreateTopics => now!(create_topics, kafka_protocol::messages::CreateTopicsRequest),
        ApiKey::DeleteTopics => now!(delete_topics, kafka_protocol::messages::DeleteTopicsRequest),
        ApiKey::CreatePartitions => now!(
            create_partitions,
            kafka_protocol::messages::CreatePartitionsRequest
        ),
        ApiKey::DescribeCluster => now!(
            describe_cluster,
            kafka_protocol::messages::DescribeClusterRequest
        ),
        ApiKey::DescribeConfigs => now!(
            describe_configs,
            kafka_protocol::messages::DescribeConfigsRequest
        ),
        ApiKey::InitProducerId => now!(
            init_producer_id,
            kafka_protocol::messages::InitProducerIdRequest
        ),
        ApiKey::ListOffsets => now!(list_offsets, kafka_protocol::messages::ListOffsetsRequest),
        ApiKey::Produce => {
            let body = decode(&mut frame, version)?;
            let later = produce::handle(&shard, &req, body).await;
            Ok(Reply::Later(
                async move { later.await.and_then(|resp| encode(corr, version, &resp)) }
                    .boxed_local(),
            ))
        }
        ApiKey::Fetch => {
            let body = decode(&mut frame, version)?;
            let shard = shard.clone();
            Ok(Reply::Later(
                async move {
                    let resp = fetch::handle(&shard, &req, body).await;
                    encode(corr, version, &resp)
                }
                .boxed_local(),
            ))
        }
        _ => Err(Close("API in the table without a handler")),
    }
}

/// kafka-protocol's own version range for a key, to check the table.
pub fn library_versions(key: ApiKey) -> (i16, i16) {
    let v = key.valid_versions();
    (v.min, v.max)
}

/// Helpers shared by handlers.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_within_the_library_and_unique() {
        for (i, a) in APIS.iter().enumerate() {
            let (lo, hi) = library_versions(a.key);
            assert!(a.min >= lo, "{:?} min below the codec's", a.key);
            assert!(a.max <= hi, "{:?} max above the codec's", a.key);
            assert!(a.min <= a.max);
            assert!(
                APIS[i + 1..].iter().all(|b| b.key != a.key),
                "{:?} twice",
                a.key
            );
        }
    }
}
