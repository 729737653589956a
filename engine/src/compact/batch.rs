//! One stored batch taken apart into its records, and put back together
//! with some of them, as Kafka's cleaner rewrites a batch
//! (`MemoryRecords.filterTo`):
//! - the base offset and `lastOffsetDelta` never change, so every record
//!   keeps its offset and the batch still ends where it did (a producer's
//!   `lastSequence` = `baseSequence + lastOffsetDelta` still holds);
//! - producer id, epoch, base sequence, the transactional flag, the
//!   partition leader epoch, the timestamp type and the codec are kept
//!   (the codec at its default level);
//! - the base timestamp becomes the delete horizon when one is set (the
//!   attribute bit [`ATTR_DELETE_HORIZON`]), else the first survivor's
//!   timestamp, and every record's timestamp delta is recomputed so its
//!   absolute timestamp is unchanged (deltas may go negative);
//! - `maxTimestamp` is the survivors' largest (LogAppendTime: the
//!   original, which is every record's timestamp), the count and CRC are
//!   recomputed.
//!
//! A batch with no survivor can still be needed as an empty header (61
//! bytes, count 0, no compression, offsets and producer fields kept), so
//! that consumers learn where it ended.

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::limits::DECOMPRESSED_BATCH_BYTES_MAX;
pub use crate::records::Header;
use crate::records::{
    compress, invalid, put_varint, records_reader, varint_in, write_batch, Invalid,
    ATTR_COMPRESSION_MASK, ATTR_DELETE_HORIZON, ATTR_LOG_APPEND_TIME, BATCH_HEADER_BYTES,
};

/// One record, as found in a decoded batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    /// None: a null key.
    pub key: Option<&'a [u8]>,
    /// A null value: a tombstone.
    pub tombstone: bool,
    attributes: u8,
    offset_delta: i64,
    /// From the key length to the record's end, copied as is.
    tail: &'a [u8],
}

/// A batch's header and its records, decompressed.
pub struct Decoded {
    pub header: Header,
    pub base_offset: i64,
    body: Vec<u8>,
    /// (start, end) of each record in `body`, its length prefix excluded.
    spans: Vec<(usize, usize)>,
}

impl Decoded {
    /// Takes `batch` (whose base offset is `base_offset`) apart; nothing
    /// is sized from its bytes beyond [`DECOMPRESSED_BATCH_BYTES_MAX`].
    pub fn new(batch: &[u8], base_offset: i64) -> Result<Decoded, Invalid> {
        let header = Header::parse(batch)?;
        let corrupt = |m: String| invalid(ErrorCode::CorruptMessage, m);
        let compressed = &batch[BATCH_HEADER_BYTES..];
        let body = if header.codec() == 0 {
            compressed.to_vec()
        } else {
            let mut out = Vec::with_capacity(compressed.len() * 2);
            let reader = records_reader(header.codec(), compressed)?;
            std::io::Read::read_to_end(
                &mut std::io::Read::take(reader, DECOMPRESSED_BATCH_BYTES_MAX + 1),
                &mut out,
            )
            .map_err(|e| corrupt(format!("decompression failed: {e}")))?;
            if out.len() as u64 > DECOMPRESSED_BATCH_BYTES_MAX {
                return Err(corrupt("decompressed batch too large".into()));
            }
            out
        };
        let mut spans = Vec::with_capacity(header.record_count.clamp(0, 1 << 16) as usize);
        let mut pos = 0;
        while pos < body.len() {
            let (len, n) = varint_in(&body[pos..])?;
            pos += n;
            if len < 1 || pos as u64 + len as u64 > body.len() as u64 {
                return Err(corrupt(format!("record length {len}")));
            }
            spans.push((pos, pos + len as usize));
            pos += len as usize;
        }
        if spans.len() != header.record_count.max(0) as usize {
            return Err(corrupt(format!(
                "recordCount says {} but the batch holds {}",
                header.record_count,
                spans.len()
            )));
        }
        let d = Decoded {
            header,
            base_offset,
            body,
            spans,
        };
        // Every record must parse: rebuilding relies on it.
        for i in 0..d.spans.len() {
            d.record(i)?;
        }
        Ok(d)
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Record `i`.
    pub fn record(&self, i: usize) -> Result<Record<'_>, Invalid> {
        let (start, end) = self.spans[i];
        let r = &self.body[start..end];
        let truncated = || invalid(ErrorCode::CorruptMessage, "truncated record");
        let attributes = *r.first().ok_or_else(truncated)?;
        let mut pos = 1;
        let next = |pos: &mut usize| -> Result<i64, Invalid> {
            let (v, n) = varint_in(r.get(*pos..).ok_or_else(truncated)?)?;
            *pos += n;
            Ok(v)
        };
        let ts_delta = next(&mut pos)?;
        let offset_delta = next(&mut pos)?;
        let tail_at = pos;
        let key_len = next(&mut pos)?;
        let key = if key_len < 0 {
            None
        } else {
            let k = r
                .get(pos..pos.saturating_add(key_len as usize))
                .ok_or_else(truncated)?;
            pos += key_len as usize;
            Some(k)
        };
        let value_len = next(&mut pos)?;
        Ok(Record {
            offset: self.base_offset.wrapping_add(offset_delta),
            timestamp: self.header.base_timestamp.wrapping_add(ts_delta),
            key,
            tombstone: value_len < 0,
            attributes,
            offset_delta,
            tail: &r[tail_at..],
        })
    }

    /// The batch with only the records `keep` says yes to (by index),
    /// with `horizon` as its delete horizon if given. At least one record
    /// must be kept.
    pub fn rebuild(&self, keep: &[bool], horizon: Option<i64>) -> Result<Bytes, Invalid> {
        let kept: Vec<Record<'_>> = (0..self.len())
            .filter(|&i| keep[i])
            .map(|i| self.record(i))
            .collect::<Result<_, _>>()?;
        let first = kept.first().ok_or_else(|| {
            invalid(
                ErrorCode::KafkaStorageError,
                "a rebuilt batch needs a record",
            )
        })?;
        let h = &self.header;
        let base_timestamp = horizon.unwrap_or(first.timestamp);
        let log_append = h.attributes & ATTR_LOG_APPEND_TIME != 0;
        let max_timestamp = if log_append {
            h.max_timestamp
        } else {
            kept.iter().map(|r| r.timestamp).max().unwrap_or(-1)
        };
        let mut raw = Vec::with_capacity(self.body.len());
        let mut rec = Vec::new();
        for r in &kept {
            rec.clear();
            rec.push(r.attributes);
            put_varint(&mut rec, r.timestamp.wrapping_sub(base_timestamp));
            put_varint(&mut rec, r.offset_delta);
            rec.extend_from_slice(r.tail);
            put_varint(&mut raw, rec.len() as i64);
            raw.extend_from_slice(&rec);
        }
        let records = compress(h.codec(), &raw)?;
        let mut attributes = h.attributes & !ATTR_DELETE_HORIZON;
        if horizon.is_some() {
            attributes |= ATTR_DELETE_HORIZON;
        }
        let fields = Header {
            attributes,
            base_timestamp,
            max_timestamp,
            record_count: kept.len() as i32,
            ..*h
        };
        Ok(write_batch(self.base_offset, &fields, &records))
    }
}

/// The empty header Kafka keeps of a batch with no survivor: offsets and
/// producer fields kept, count 0, no compression, base timestamp -1, no
/// horizon.
pub fn empty_header(h: &Header, base_offset: i64) -> Bytes {
    let fields = Header {
        attributes: h.attributes & !(ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON),
        base_timestamp: -1,
        record_count: 0,
        ..*h
    };
    write_batch(base_offset, &fields, &[])
}

/// An empty batch covering just `offset` (where a removed marker was), so
/// that a span still ends with a batch: no producer, count 0.
pub fn empty_batch(offset: i64, max_timestamp: i64) -> Bytes {
    let fields = Header {
        leader_epoch: 0,
        attributes: 0,
        last_offset_delta: 0,
        base_timestamp: -1,
        max_timestamp,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: 0,
    };
    write_batch(offset, &fields, &[])
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::records::{i32_at, i64_at, ATTR_TRANSACTIONAL};

    /// One record to build a test batch from: (key, value, timestamp).
    pub type Rec<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, i64);

    /// A batch of `records` at consecutive offsets, base timestamp the
    /// first record's, with codec `codec` and producer `pid`.
    pub fn make_batch(records: &[Rec<'_>], codec: i16, pid: i64, transactional: bool) -> Vec<u8> {
        let base_ts = records.first().map_or(0, |r| r.2);
        let mut raw = Vec::new();
        for (i, (k, v, ts)) in records.iter().enumerate() {
            let mut r = vec![0u8];
            put_varint(&mut r, ts - base_ts);
            put_varint(&mut r, i as i64);
            match k {
                None => put_varint(&mut r, -1),
                Some(k) => {
                    put_varint(&mut r, k.len() as i64);
                    r.extend_from_slice(k);
                }
            }
            match v {
                None => put_varint(&mut r, -1),
                Some(v) => {
                    put_varint(&mut r, v.len() as i64);
                    r.extend_from_slice(v);
                }
            }
            put_varint(&mut r, 0);
            put_varint(&mut raw, r.len() as i64);
            raw.extend(r);
        }
        let mut attributes = codec;
        if transactional {
            attributes |= ATTR_TRANSACTIONAL;
        }
        let h = Header {
            leader_epoch: 3,
            attributes,
            last_offset_delta: records.len() as i32 - 1,
            base_timestamp: base_ts,
            max_timestamp: records.iter().map(|r| r.2).max().unwrap_or(-1),
            producer_id: pid,
            producer_epoch: if pid >= 0 { 1 } else { -1 },
            base_sequence: if pid >= 0 { 10 } else { -1 },
            record_count: records.len() as i32,
        };
        write_batch(0, &h, &compress(codec, &raw).unwrap()).to_vec()
    }

    #[test]
    fn a_rebuilt_batch_keeps_offsets_timestamps_and_producer_fields() {
        for codec in 0..=4 {
            let b = make_batch(
                &[
                    (Some(b"a"), Some(b"1"), 1000),
                    (Some(b"b"), Some(b"2"), 1001),
                    (Some(b"c"), None, 1002),
                    (Some(b"d"), Some(b"4"), 1003),
                    (Some(b"e"), Some(b"5"), 1004),
                ],
                codec,
                7,
                false,
            );
            let d = Decoded::new(&b, 100).unwrap();
            assert_eq!(d.len(), 5);
            let out = d
                .rebuild(&[false, true, true, false, false], Some(5000))
                .unwrap();
            assert_eq!(i64_at(&out, 0), 100);
            assert_eq!(crc32c::crc32c(&out[21..]), i32_at(&out, 17) as u32);
            let again = Decoded::new(&out, 100).unwrap();
            let h = again.header;
            assert_eq!(h.codec(), codec);
            assert_eq!(h.last_offset_delta, 4, "the batch still ends at 104");
            assert_eq!(h.record_count, 2);
            assert_eq!(h.delete_horizon(), Some(5000));
            assert_eq!(h.max_timestamp, 1002);
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (7, 1, 10)
            );
            assert_eq!(h.leader_epoch, 3);
            let r: Vec<_> = (0..2).map(|i| again.record(i).unwrap()).collect();
            assert_eq!(
                (r[0].offset, r[0].timestamp, r[0].key),
                (101, 1001, Some(&b"b"[..]))
            );
            assert_eq!(
                (r[1].offset, r[1].timestamp, r[1].tombstone),
                (102, 1002, true)
            );
            // Without a horizon the base timestamp is the first survivor's.
            let out = d.rebuild(&[false, false, false, true, true], None).unwrap();
            let h = Header::parse(&out).unwrap();
            assert_eq!((h.base_timestamp, h.delete_horizon()), (1003, None));
        }
    }

    #[test]
    fn empty_headers_keep_where_the_batch_ended() {
        let b = make_batch(
            &[(Some(b"a"), Some(b"1"), 9), (Some(b"b"), None, 10)],
            3,
            5,
            true,
        );
        let h = Header::parse(&b).unwrap();
        let e = empty_header(&h, 40);
        assert_eq!(e.len(), BATCH_HEADER_BYTES);
        let eh = Header::parse(&e).unwrap();
        assert_eq!(eh.record_count, 0);
        assert_eq!(eh.codec(), 0);
        assert!(eh.transactional());
        assert_eq!((eh.last_offset_delta, eh.max_timestamp), (1, 10));
        assert_eq!(Decoded::new(&e, 40).unwrap().len(), 0);
        let m = empty_batch(77, 123);
        assert_eq!(Header::parse(&m).unwrap().producer_id, -1);
        assert_eq!(crc32c::crc32c(&m[21..]), i32_at(&m, 17) as u32);
    }

    #[test]
    fn mutated_stored_batches_never_panic() {
        let mut seeds = Vec::new();
        for codec in 0..=4 {
            seeds.push(make_batch(
                &[
                    (Some(b"k1"), Some(b"v1"), 5),
                    (None, Some(b"v2"), 6),
                    (Some(b"k3"), None, 4),
                ],
                codec,
                3,
                codec % 2 == 0,
            ));
        }
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..20_000u32 {
            let mut b = seeds[(next() as usize) % seeds.len()].clone();
            match round % 3 {
                0 => {
                    for _ in 0..1 + next() % 4 {
                        let i = (next() as usize) % b.len();
                        b[i] = next() as u8;
                    }
                }
                1 => b.truncate((next() as usize) % (b.len() + 1)),
                _ => {
                    let i = BATCH_HEADER_BYTES + (next() as usize) % (b.len() - BATCH_HEADER_BYTES);
                    b[i..].iter_mut().take(4).for_each(|v| *v = 0xff);
                }
            }
            crate::compact::fuzz_stored_batch(&b);
            crate::compact::fuzz_stored_chunks(&b);
        }
    }

    #[test]
    fn corrupt_batches_are_refused_not_panicked_on() {
        let b = make_batch(&[(Some(b"key"), Some(b"value"), 1)], 0, -1, false);
        for cut in 0..b.len() {
            let mut x = b[..cut].to_vec();
            let _ = Decoded::new(&x, 0);
            x.extend(std::iter::repeat_n(0xff, 8));
            let _ = Decoded::new(&x, 0);
        }
        let mut x = b.clone();
        x[57..61].copy_from_slice(&9i32.to_be_bytes());
        assert!(Decoded::new(&x, 0).is_err());
    }
}
