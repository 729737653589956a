//! Versions Kafka 4 advertises without serving them: Produce v0–2
//! (KAFKA-18659). librdkafka before 2.11 (Debian's kcat among its users)
//! turns compression off against a broker whose ApiVersions lacks Produce
//! v0–2, so the versions are listed; a request at one is answered, in its
//! own layout, with UNSUPPORTED_VERSION for every partition, as Kafka 4
//! answers it, instead of a dropped connection the client cannot explain.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use rutomq_shards::{Close, Reply};

use super::Req;
use crate::error::ErrorCode;
use crate::limits::RETIRED_PARTITIONS_MAX;

/// The answer to `req` at a retired version of its API.
pub fn answer(req: &Req, body: Bytes) -> Result<Reply, Close> {
    match req.key.api_key() {
        Some(ApiKey::Produce) => {
            let (acks, topics) = parse_produce(body)?;
            tracing::info!(client = %req.client_id(), version = req.version,
                "Produce refused: versions 0-2 are advertised for old clients, not served");
            if acks == 0 {
                return Ok(Reply::Now(None));
            }
            Ok(Reply::Now(Some(
                produce_error(req.header.correlation_id, req.version, &topics).into(),
            )))
        }
        _ => Err(Close("a retired version of an API that has none")),
    }
}

/// Checks a body at a retired version without answering it (hostile-input
/// tests).
pub fn parse(req: &Req, body: Bytes) -> Result<(), Close> {
    match req.key.api_key() {
        Some(ApiKey::Produce) => parse_produce(body).map(drop),
        _ => Err(Close("a retired version of an API that has none")),
    }
}

type Topics = Vec<(Bytes, Vec<i32>)>;

/// Produce v0–2's acks and its topics' names and partitions (the records
/// are skipped).
fn parse_produce(mut b: Bytes) -> Result<(i16, Topics), Close> {
    let acks = i16_of(&mut b)?;
    let _timeout_ms = i32_of(&mut b)?;
    let n = count(&mut b, 6)?;
    let mut topics = Vec::with_capacity(n);
    let mut partitions_left = RETIRED_PARTITIONS_MAX;
    for _ in 0..n {
        let len = i16_of(&mut b)?;
        let name = take(&mut b, usize::try_from(len).map_err(|_| BAD)?)?;
        let m = count(&mut b, 8)?;
        partitions_left = partitions_left
            .checked_sub(m)
            .ok_or(Close("too many partitions"))?;
        let mut partitions = Vec::with_capacity(m);
        for _ in 0..m {
            partitions.push(i32_of(&mut b)?);
            let len = i32_of(&mut b)?;
            if len >= 0 {
                take(&mut b, len as usize)?;
            }
        }
        topics.push((name, partitions));
    }
    Ok((acks, topics))
}

/// Produce v0–2's response: UNSUPPORTED_VERSION for every partition.
fn produce_error(correlation_id: i32, version: i16, topics: &Topics) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(0); // the size, set below
    b.put_i32(correlation_id);
    b.put_i32(topics.len() as i32);
    for (name, partitions) in topics {
        b.put_i16(name.len() as i16);
        b.put_slice(name);
        b.put_i32(partitions.len() as i32);
        for &p in partitions {
            b.put_i32(p);
            b.put_i16(ErrorCode::UnsupportedVersion.code());
            b.put_i64(-1); // base offset
            if version >= 2 {
                b.put_i64(-1); // log append time
            }
        }
    }
    if version >= 1 {
        b.put_i32(0); // throttle time
    }
    let size = (b.len() - 4) as i32;
    b[..4].copy_from_slice(&size.to_be_bytes());
    b.freeze()
}

const BAD: Close = Close("malformed request at a retired version");

fn i16_of(b: &mut Bytes) -> Result<i16, Close> {
    (b.remaining() >= 2).then(|| b.get_i16()).ok_or(BAD)
}

fn i32_of(b: &mut Bytes) -> Result<i32, Close> {
    (b.remaining() >= 4).then(|| b.get_i32()).ok_or(BAD)
}

fn take(b: &mut Bytes, n: usize) -> Result<Bytes, Close> {
    (b.remaining() >= n).then(|| b.split_to(n)).ok_or(BAD)
}

/// An array's element count, each element at least `least` bytes long
/// (so a count beyond what the body can hold is refused before any
/// allocation).
fn count(b: &mut Bytes, least: usize) -> Result<usize, Close> {
    let n = usize::try_from(i32_of(b)?).map_err(|_| BAD)?;
    (n.saturating_mul(least) <= b.remaining())
        .then_some(n)
        .ok_or(BAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_request(acks: i16) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(acks);
        b.put_i32(1000);
        b.put_i32(1);
        b.put_i16(3);
        b.put_slice(b"top");
        b.put_i32(2);
        for p in [0, 5] {
            b.put_i32(p);
            b.put_i32(3);
            b.put_slice(b"xyz");
        }
        b.freeze()
    }

    #[test]
    fn every_partition_is_answered_unsupported_in_the_versions_layout() {
        let (acks, topics) = parse_produce(v2_request(-1)).unwrap();
        assert_eq!(acks, -1);
        assert_eq!(topics, vec![(Bytes::from_static(b"top"), vec![0, 5])]);
        for (version, per_partition) in [(0i16, 14usize), (1, 14), (2, 22)] {
            let frame = produce_error(9, version, &topics);
            let throttle = if version >= 1 { 4 } else { 0 };
            assert_eq!(
                frame.len(),
                4 + 4 + 4 + 2 + 3 + 4 + 2 * per_partition + throttle
            );
            assert_eq!(&frame[4..8], &9i32.to_be_bytes());
            let first_error = 4 + 4 + 4 + 2 + 3 + 4 + 4;
            assert_eq!(&frame[first_error..first_error + 2], &35i16.to_be_bytes());
        }
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let good = v2_request(1);
        for cut in 0..good.len() {
            assert!(parse_produce(good.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut huge = BytesMut::from(&good[..6]);
        huge.put_i32(i32::MAX);
        assert!(parse_produce(huge.freeze()).is_err());
    }
}
