//! Decoding requests and encoding responses, with the network treated as
//! hostile input: a decoder error or panic closes one connection.

use std::panic::AssertUnwindSafe;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};
use rutomq_shards::Close;

/// Decoder panics caught (a bug in a decoder; each closes one connection).
pub static DECODER_PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Decodes a message, turning a decoder error or panic into a closed
/// connection.
pub fn decode<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, Close> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| T::decode(buf, version))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(Close("malformed request body")),
        Err(_) => {
            DECODER_PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::error!("a request made the decoder panic; closing the connection");
            Err(Close("request body made the decoder panic"))
        }
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

/// Encodes a request frame body (header + request, no size prefix).
pub fn encode_request<R: Request>(version: i16, req: &R) -> Option<Bytes> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(7);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, R::header_version(version)).ok()?;
    req.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}
