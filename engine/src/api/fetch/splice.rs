//! The Fetch response encoder: the response is encoded by kafka-protocol
//! with a small marker in place of each record set, then assembled with the
//! record sets (base offsets patched) where their markers and length
//! prefixes were. Large batches are pieces of the frame in the buffers they
//! were read into (the socket's copy is their only one); small ones are
//! copied once, with the rest of the frame. Record bytes are never decoded.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::FetchResponse;

use rutomq_shards::ResponseFrame;

use crate::api::wire::{put_uvarint, uvarint_size};
use crate::limits::FETCH_BATCH_IN_PLACE_BYTES_MIN;
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
    /// record set, then assembled with the record sets (base offsets
    /// patched) where their markers and length prefixes were. Batches of
    /// at least [`FETCH_BATCH_IN_PLACE_BYTES_MIN`] are pieces of the frame
    /// as they are (after their new base offset), not copied; the rest of
    /// the frame is copied once into one buffer.
    pub fn encode(&self, correlation_id: i32, version: i16) -> Option<ResponseFrame> {
        let frame = crate::api::encode(correlation_id, version, &self.resp)?;
        if self.records.is_empty() {
            return Some(frame.into());
        }
        // Records are COMPACT_RECORDS (uvarint length + 1) from v12, else
        // an int32 length.
        let flexible = version >= 12;
        let prefix: &[u8] = if flexible {
            &[MARKER_BYTES as u8 + 1]
        } else {
            &[0, 0, 0, MARKER_BYTES as u8]
        };
        // Where each record set's length prefix and marker are.
        let mut found = Vec::with_capacity(self.records.len());
        let mut pos = 0;
        for i in 0..self.records.len() {
            let index = (i as u64).to_be_bytes();
            let is_marker = |w: &[u8]| w[..8] == self.tag && w[8..] == index;
            let Some(at) = frame[pos..].windows(MARKER_BYTES).position(is_marker) else {
                tracing::error!(i, "fetch record marker missing from the encoded response");
                return None;
            };
            let at = pos + at;
            let Some(len_at) = at
                .checked_sub(prefix.len())
                .filter(|&l| &frame[l..at] == prefix)
            else {
                tracing::error!(i, "fetch record marker without its length prefix");
                return None;
            };
            found.push((len_at, at));
            pos = at + MARKER_BYTES;
        }
        let in_place = |b: &bytes::Bytes| b.len() >= FETCH_BATCH_IN_PLACE_BYTES_MIN;
        let length_bytes = |r: &Records| {
            if flexible {
                uvarint_size(r.len as u32 + 1)
            } else {
                4
            }
        };
        let mut total = frame.len() - self.records.len() * (prefix.len() + MARKER_BYTES);
        let mut copied = frame.len();
        let mut pieces = 1;
        for r in &self.records {
            total += length_bytes(r) + r.len;
            copied += length_bytes(r);
            for (_, b) in &r.batches {
                if in_place(b) {
                    copied += 8;
                    pieces += 2;
                } else {
                    copied += b.len();
                }
            }
        }
        let mut out = BytesMut::with_capacity(copied);
        let mut frame_pieces = Vec::with_capacity(pieces);
        out.put_i32((total - 4) as i32);
        let mut pos = 4;
        for (records, (len_at, at)) in self.records.iter().zip(found) {
            out.extend_from_slice(&frame[pos..len_at]);
            if flexible {
                put_uvarint(&mut out, records.len as u32 + 1);
            } else {
                out.put_i32(records.len as i32);
            }
            for (base, batch) in &records.batches {
                if in_place(batch) {
                    out.put_i64(*base);
                    frame_pieces.push(out.split().freeze());
                    frame_pieces.push(batch.slice(8..));
                } else {
                    crate::records::put_with_base_offset(&mut out, batch, *base);
                }
            }
            pos = at + MARKER_BYTES;
        }
        out.extend_from_slice(&frame[pos..]);
        frame_pieces.push(out.freeze());
        let frame = ResponseFrame::from_pieces(frame_pieces);
        if frame.len() != total {
            // The size prefix would desynchronize the client's stream.
            tracing::error!(
                len = frame.len(),
                total,
                "fetch response assembled to the wrong size"
            );
            return None;
        }
        Some(frame)
    }
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
        // Small batches are copied, large ones sent in place, in every
        // order.
        let big = FETCH_BATCH_IN_PLACE_BYTES_MIN;
        let sets = [
            vec![(5i64, batch(1, 70)), (9, batch(2, 200))],
            vec![(100, batch(3, 130))],
            vec![(300, batch(4, big)), (400, batch(5, 61))],
            vec![
                (500, batch(6, 90)),
                (600, batch(7, big + 1)),
                (700, batch(8, 3 * big)),
            ],
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
            assert_eq!(got.to_bytes(), want, "version {version}");
            assert_eq!(got.len(), want.len());
            // The three large batches are pieces of their own, in the
            // memory they were in (all but their base offset).
            let in_place: Vec<_> = sets
                .iter()
                .flatten()
                .filter(|(_, b)| b.len() >= big)
                .map(|(_, b)| b[8..].as_ptr())
                .collect();
            let pieces: Vec<_> = got.pieces().iter().map(|p| p.as_ptr()).collect();
            assert_eq!(pieces.len(), 2 * in_place.len() + 1);
            for p in in_place {
                assert!(pieces.contains(&p), "version {version}");
            }
        }
    }
}
