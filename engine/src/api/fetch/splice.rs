//! The Fetch response encoder: the response is encoded by kafka-protocol
//! with a small marker in place of each record set, then copied once with
//! the record sets (base offsets patched) written where their markers and
//! length prefixes were. Record bytes are copied once, straight into the
//! frame, and never decoded.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::FetchResponse;

use crate::read::Records;

const MARKER_BYTES: usize = 16;

/// The placeholder of record set `i`: the response's random tag and `i`.
pub(super) fn marker(tag: &[u8; 8], i: usize) -> bytes::Bytes {
    let mut m = Vec::with_capacity(MARKER_BYTES);
    m.extend_from_slice(tag);
    m.extend_from_slice(&(i as u64).to_be_bytes());
    bytes::Bytes::from(m)
}

/// A Fetch response whose record sets are still separate.
pub struct FetchReply {
    resp: FetchResponse,
    records: Vec<Records>,
    tag: [u8; 8],
}

impl FetchReply {
    pub(super) fn new(
        responses: Vec<FetchableTopicResponse>,
        records: Vec<Records>,
        tag: [u8; 8],
    ) -> FetchReply {
        FetchReply {
            resp: FetchResponse::default()
                .with_session_id(0)
                .with_responses(responses),
            records,
            tag,
        }
    }

    /// The empty response of a throttled client.
    pub fn throttled(throttle_time_ms: i32) -> FetchReply {
        FetchReply {
            resp: FetchResponse::default()
                .with_session_id(0)
                .with_throttle_time_ms(throttle_time_ms),
            records: Vec::new(),
            tag: [0; 8],
        }
    }

    pub fn with_throttle_time_ms(mut self, ms: i32) -> FetchReply {
        self.resp.throttle_time_ms = ms;
        self
    }

    /// The response frame: encoded with a small marker in place of each
    /// record set, then copied once with the record sets (base offsets
    /// patched) written where their markers and length prefixes were.
    pub fn encode(&self, correlation_id: i32, version: i16) -> Option<bytes::Bytes> {
        let frame = crate::api::encode(correlation_id, version, &self.resp)?;
        if self.records.is_empty() {
            return Some(frame);
        }
        // Records are COMPACT_RECORDS (uvarint length + 1) from v12, else
        // an int32 length.
        let flexible = version >= 12;
        let prefix: &[u8] = if flexible {
            &[MARKER_BYTES as u8 + 1]
        } else {
            &[0, 0, 0, MARKER_BYTES as u8]
        };
        let total: usize = self.records.iter().map(|r| r.len).sum();
        let mut out = BytesMut::with_capacity(frame.len() + total);
        let mut pos = 0;
        for (i, records) in self.records.iter().enumerate() {
            let index = (i as u64).to_be_bytes();
            let is_marker = |w: &[u8]| w[..8] == self.tag && w[8..] == index;
            let Some(found) = frame[pos..].windows(MARKER_BYTES).position(is_marker) else {
                tracing::error!(i, "fetch record marker missing from the encoded response");
                return None;
            };
            let at = pos + found;
            let Some(len_at) = at
                .checked_sub(prefix.len())
                .filter(|&l| &frame[l..at] == prefix)
            else {
                tracing::error!(i, "fetch record marker without its length prefix");
                return None;
            };
            out.extend_from_slice(&frame[pos..len_at]);
            if flexible {
                put_uvarint(&mut out, records.len as u64 + 1);
            } else {
                out.put_i32(records.len as i32);
            }
            records.write_to(&mut out);
            pos = at + MARKER_BYTES;
        }
        out.extend_from_slice(&frame[pos..]);
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        Some(out.freeze())
    }
}

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::PartitionData;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;
    use uuid::Uuid;

    fn batch(n: u8, len: usize) -> bytes::Bytes {
        let mut b = vec![n; len];
        b[..8].copy_from_slice(&0i64.to_be_bytes());
        bytes::Bytes::from(b)
    }

    /// The spliced frame equals kafka-protocol's encoding of the same
    /// response with the records in place, at every served version.
    #[test]
    fn spliced_records_encode_like_the_library() {
        let tag = *b"tagtagta";
        let sets = [
            vec![(5i64, batch(1, 70)), (9, batch(2, 200))],
            vec![(100, batch(3, 130))],
        ];
        for version in 4..=18 {
            let mut records = Vec::new();
            let mut direct = Vec::new();
            let mut spliced = Vec::new();
            for (p, set) in sets.iter().enumerate() {
                let mut r = Records::default();
                let mut bytes = BytesMut::new();
                for (base, b) in set {
                    r.push(*base, b.clone());
                    crate::records::put_with_base_offset(&mut bytes, b, *base);
                }
                let data = PartitionData::default()
                    .with_partition_index(p as i32)
                    .with_high_watermark(200);
                direct.push(data.clone().with_records(Some(bytes.freeze())));
                records.push(r);
                spliced.push(data.with_records(Some(marker(&tag, p))));
            }
            // A partition without data stays as it is.
            let empty = PartitionData::default()
                .with_partition_index(7)
                .with_records(Some(bytes::Bytes::new()));
            direct.push(empty.clone());
            spliced.push(empty);
            let topic = |parts| {
                vec![FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_static_str("t")))
                    .with_topic_id(Uuid::from_u128(7))
                    .with_partitions(parts)]
            };
            let want = crate::api::encode(
                3,
                version,
                &FetchResponse::default().with_responses(topic(direct)),
            )
            .unwrap();
            let got = FetchReply::new(topic(spliced), records, tag)
                .encode(3, version)
                .unwrap();
            assert_eq!(got, want, "version {version}");
        }
    }
}
