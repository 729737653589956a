//! Record batches (magic v2): built incrementally by the producer, decoded
//! by the consumer, with no compression, LZ4 (frame format) or Zstd.
//!
//! The builder appends each record's bytes as it is produced (no record
//! structs kept), and compresses and checksums once when the batch closes.
//! The decoder checks the CRC32C, the lengths against the bytes present and
//! the decompressed size against a bound, and hands out keys and values as
//! slices of one buffer.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::{Compression, NATIVE_COMPRESSIONS};

/// Bytes before the first record: base offset through record count.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Where the CRC'd part begins (the attributes).
const CRC_START: usize = 21;
/// The most bytes a compressed batch may inflate to (a bound against
/// decompression bombs; Kafka's own largest message is 1 MiB by default).
pub const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;
/// Records in one batch at most (the count field is checked against it
/// before anything is allocated for it).
pub const BATCH_RECORDS_MAX: usize = 1 << 22;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

impl Compression {
    fn attribute(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    fn from_attribute(a: i16) -> Result<Compression> {
        Ok(match a & ATTR_COMPRESSION_MASK {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(Error::Protocol(format!("unknown compression type {other}"))),
        })
    }
}

/// The idempotence fields of a batch; `NONE` for a plain producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIds {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerIds {
    pub const NONE: ProducerIds = ProducerIds {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// A record batch being filled.
#[derive(Debug)]
pub struct BatchBuilder {
    compression: Compression,
    records: BytesMut,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// A new batch; fails for a codec the native path does not have.
    pub fn new(compression: Compression) -> Result<BatchBuilder> {
        if !NATIVE_COMPRESSIONS.contains(&compression) {
            return Err(Error::unsupported_native_producer(&format!(
                "{compression:?} compression"
            )));
        }
        Ok(BatchBuilder {
            compression,
            records: BytesMut::with_capacity(16 << 10),
            count: 0,
            base_timestamp: 0,
            max_timestamp: i64::MIN,
        })
    }

    pub fn record_count(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Uncompressed size of the batch so far (what `batch.size` bounds).
    pub fn size_bytes(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }

    /// The size one more record would add, for the caller's fullness check.
    pub fn record_size(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(String, Option<Bytes>)],
    ) -> usize {
        // Upper bound: varints at their widest for the deltas.
        1 + 10
            + 5
            + 5
            + key.map_or(0, <[u8]>::len)
            + 5
            + value.map_or(0, <[u8]>::len)
            + 5
            + headers
                .iter()
                .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, Bytes::len))
                .sum::<usize>()
            + 5
    }

    /// Appends a record with timestamp `timestamp_ms` (CreateTime).
    pub fn push(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(String, Option<Bytes>)],
    ) {
        if self.count == 0 {
            self.base_timestamp = timestamp_ms;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
        let mut body = Vec::with_capacity(Self::record_size(key, value, headers));
        body.push(0u8); // record attributes (unused)
        put_varlong(&mut body, timestamp_ms.wrapping_sub(self.base_timestamp));
        put_varint(&mut body, self.count);
        put_bytes(&mut body, key);
        put_bytes(&mut body, value);
        put_varint(&mut body, headers.len() as i32);
        for (k, v) in headers {
            put_bytes(&mut body, Some(k.as_bytes()));
            put_bytes(&mut body, v.as_deref());
        }
        let mut len = Vec::with_capacity(5);
        put_varint(&mut len, body.len() as i32);
        self.records.put_slice(&len);
        self.records.put_slice(&body);
        self.count += 1;
    }

    /// Closes the batch: compresses the records, writes the header and the
    /// CRC. Base offset 0, leader epoch -1 (the broker assigns both).
    pub fn finish(self, ids: ProducerIds) -> Result<Bytes> {
        assert!(self.count > 0, "an empty batch is never sent");
        let payload: Bytes = match self.compression {
            Compression::None => self.records.freeze(),
            Compression::Lz4 => {
                let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
                std::io::Write::write_all(&mut enc, &self.records)?;
                Bytes::from(
                    enc.finish()
                        .map_err(|e| Error::Protocol(format!("lz4: {e}")))?,
                )
            }
            Compression::Zstd => Bytes::from(zstd::bulk::compress(&self.records, 3)?),
            Compression::Gzip | Compression::Snappy => unreachable!("refused in new()"),
        };
        let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + payload.len());
        out.put_i64(0); // base offset
        out.put_i32((BATCH_HEADER_BYTES - 12 + payload.len()) as i32);
        out.put_i32(-1); // partition leader epoch
        out.put_i8(2); // magic
        out.put_u32(0); // crc, below
        out.put_i16(self.compression.attribute());
        out.put_i32(self.count - 1); // last offset delta
        out.put_i64(self.base_timestamp);
        out.put_i64(self.max_timestamp);
        out.put_i64(ids.producer_id);
        out.put_i16(ids.producer_epoch);
        out.put_i32(ids.base_sequence);
        out.put_i32(self.count);
        debug_assert_eq!(out.len(), BATCH_HEADER_BYTES);
        out.put_slice(&payload);
        let crc = crc32c::crc32c(&out[CRC_START..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        Ok(out.freeze())
    }
}

/// A record read from a fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Decodes the record batches in `data` (a fetch's records field) into
/// `out`, skipping control batches and records below `min_offset`. A
/// truncated batch at the end (the broker cut at the size limit) is ignored.
/// Returns the offset after the last whole batch, if any.
pub fn decode_batches(
    mut data: Bytes,
    min_offset: i64,
    out: &mut Vec<Record>,
) -> Result<Option<i64>> {
    let mut next = None;
    while data.len() >= 12 {
        let batch_len = i32::from_be_bytes(data[8..12].try_into().expect("4 bytes"));
        if batch_len < 0 {
            return Err(Error::Protocol(format!(
                "negative batch length {batch_len}"
            )));
        }
        let total = 12 + batch_len as usize;
        if data.len() < total {
            break; // partial batch at the end of the fetch
        }
        let batch = data.split_to(total);
        next = Some(decode_batch(batch, min_offset, out)?);
    }
    Ok(next)
}

/// Decodes one whole batch; returns the offset after it.
fn decode_batch(batch: Bytes, min_offset: i64, out: &mut Vec<Record>) -> Result<i64> {
    if batch.len() < BATCH_HEADER_BYTES {
        return Err(Error::Protocol(format!(
            "record batch of {} bytes",
            batch.len()
        )));
    }
    let mut h = &batch[..BATCH_HEADER_BYTES];
    let base_offset = h.get_i64();
    let _len = h.get_i32();
    let _leader_epoch = h.get_i32();
    let magic = h.get_i8();
    if magic != 2 {
        return Err(Error::Protocol(format!(
            "record batch magic {magic} (only v2 is read)"
        )));
    }
    let crc = h.get_u32();
    let actual = crc32c::crc32c(&batch[CRC_START..]);
    if crc != actual {
        return Err(Error::Corrupt(format!(
            "record batch at offset {base_offset}: CRC {crc:#010x}, computed {actual:#010x}"
        )));
    }
    let attributes = h.get_i16();
    let last_offset_delta = h.get_i32();
    let base_timestamp = h.get_i64();
    let _max_timestamp = h.get_i64();
    let _producer_id = h.get_i64();
    let _producer_epoch = h.get_i16();
    let _base_sequence = h.get_i32();
    let count = h.get_i32();
    let next = base_offset
        .wrapping_add(i64::from(last_offset_delta))
        .wrapping_add(1);
    if attributes & ATTR_CONTROL != 0 || next <= min_offset {
        return Ok(next); // transaction markers, or all already consumed
    }
    let _ = attributes & ATTR_TRANSACTIONAL;
    if count < 0 || count as usize > BATCH_RECORDS_MAX {
        return Err(Error::Protocol(format!("record count {count}")));
    }
    let payload = batch.slice(BATCH_HEADER_BYTES..);
    let records = match Compression::from_attribute(attributes)? {
        Compression::None => payload,
        Compression::Lz4 => {
            let mut dec = lz4_flex::frame::FrameDecoder::new(&payload[..]);
            Bytes::from(read_bounded(&mut dec)?)
        }
        Compression::Zstd => {
            let mut dec = zstd::stream::read::Decoder::new(&payload[..])?;
            Bytes::from(read_bounded(&mut dec)?)
        }
        c @ (Compression::Gzip | Compression::Snappy) => {
            return Err(Error::unsupported_native_consumer(&format!(
                "{c:?}-compressed batches (at offset {base_offset})"
            )))
        }
    };
    let mut r = records;
    // A record takes 7 bytes at least: never reserve more than the bytes
    // present could hold.
    out.reserve((count as usize).min(r.len() / 7));

    for _ in 0..count {
        let len = get_varint(&mut r)?;
        if len < 0 || len as usize > r.len() {
            return Err(Error::Protocol(format!("record length {len}")));
        }
        let mut rec = r.split_to(len as usize);
        let _attributes = get_u8(&mut rec)?;
        let ts_delta = get_varlong(&mut rec)?;
        let offset_delta = get_varint(&mut rec)?;
        let key = get_bytes(&mut rec)?;
        let value = get_bytes(&mut rec)?;
        let header_count = get_varint(&mut rec)?;
        if header_count < 0 || header_count as usize > rec.len() {
            return Err(Error::Protocol(format!("header count {header_count}")));
        }
        let mut headers = Vec::with_capacity(header_count as usize);
        for _ in 0..header_count {
            let k =
                get_bytes(&mut rec)?.ok_or_else(|| Error::Protocol("null header key".into()))?;
            let k = String::from_utf8(k.to_vec())
                .map_err(|_| Error::Protocol("header key is not UTF-8".into()))?;
            headers.push((k, get_bytes(&mut rec)?));
        }
        let offset = base_offset.wrapping_add(i64::from(offset_delta));
        if offset >= min_offset {
            out.push(Record {
                offset,
                timestamp_ms: base_timestamp.wrapping_add(ts_delta),
                key,
                value,
                headers,
            });
        }
    }
    Ok(next)
}

fn read_bounded(r: &mut impl std::io::Read) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    let n = std::io::Read::read_to_end(
        &mut std::io::Read::take(r, DECOMPRESSED_BYTES_MAX as u64 + 1),
        &mut buf,
    )?;
    if n > DECOMPRESSED_BYTES_MAX {
        return Err(Error::Protocol(format!(
            "batch inflates past {DECOMPRESSED_BYTES_MAX} bytes"
        )));
    }
    Ok(buf)
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_uvarint(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

fn get_u8(b: &mut Bytes) -> Result<u8> {
    if b.is_empty() {
        return Err(Error::Protocol("record truncated".into()));
    }
    Ok(b.get_u8())
}

fn get_uvarint(b: &mut Bytes, max_bytes: u32) -> Result<u64> {
    let mut v = 0u64;
    for i in 0..max_bytes {
        let byte = get_u8(b)?;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(Error::Protocol("varint too long".into()))
}

fn get_varint(b: &mut Bytes) -> Result<i32> {
    let u = get_uvarint(b, 5)? as u32;
    Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
}

fn get_varlong(b: &mut Bytes) -> Result<i64> {
    let u = get_uvarint(b, 10)?;
    Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
}

fn get_bytes(b: &mut Bytes) -> Result<Option<Bytes>> {
    let len = get_varint(b)?;
    if len < 0 {
        return Ok(None);
    }
    if len as usize > b.len() {
        return Err(Error::Protocol(format!(
            "field length {len} past the record"
        )));
    }
    Ok(Some(b.split_to(len as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::{RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions};

    type Sample = (
        i64,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Vec<(String, Option<Bytes>)>,
    );

    fn sample(n: usize) -> Vec<Sample> {
        (0..n)
            .map(|i| {
                (
                    1_700_000_000_000 + (i as i64 % 7) * 3 - 5,
                    (i % 3 != 0).then(|| format!("key-{i}").into_bytes()),
                    (i % 5 != 0).then(|| vec![i as u8; i * 13 % 300]),
                    if i % 4 == 0 {
                        vec![
                            ("h".to_string(), Some(Bytes::from(format!("v{i}")))),
                            ("n".into(), None),
                        ]
                    } else {
                        vec![]
                    },
                )
            })
            .collect()
    }

    fn build(c: Compression, n: usize) -> Bytes {
        let mut b = BatchBuilder::new(c).unwrap();
        for (ts, k, v, h) in sample(n) {
            b.push(ts, k.as_deref(), v.as_deref(), &h);
        }
        b.finish(ProducerIds::NONE).unwrap()
    }

    /// Our batches read back through our decoder and through
    /// kafka-protocol's (an independent implementation), for each codec.
    #[test]
    fn batches_round_trip_and_match_kafka_protocol() {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for n in [1, 2, 100] {
                let batch = build(c, n);
                let mut ours = Vec::new();
                let next = decode_batches(batch.clone(), 0, &mut ours).unwrap();
                assert_eq!(next, Some(n as i64));
                let theirs = RecordBatchDecoder::decode(&mut batch.clone()).unwrap();
                assert_eq!(theirs.records.len(), n, "{c:?}");
                for ((rec, want), other) in ours.iter().zip(sample(n)).zip(&theirs.records) {
                    assert_eq!(rec.timestamp_ms, want.0);
                    assert_eq!(rec.key.as_deref(), want.1.as_deref());
                    assert_eq!(rec.value.as_deref(), want.2.as_deref());
                    assert_eq!(rec.headers, want.3);
                    assert_eq!(rec.offset, other.offset);
                    assert_eq!(rec.timestamp_ms, other.timestamp);
                    assert_eq!(rec.key, other.key);
                    assert_eq!(rec.value, other.value);
                }
            }
        }
    }

    /// kafka-protocol's batches (another encoder) decode with ours.
    #[test]
    fn decodes_batches_encoded_elsewhere() {
        use kafka_protocol::records::{Record as KRecord, TimestampType};
        for (c, kc) in [
            (
                Compression::None,
                kafka_protocol::records::Compression::None,
            ),
            (Compression::Lz4, kafka_protocol::records::Compression::Lz4),
            (
                Compression::Zstd,
                kafka_protocol::records::Compression::Zstd,
            ),
        ] {
            let records: Vec<KRecord> = (0..50)
                .map(|i| KRecord {
                    transactional: false,
                    control: false,
                    partition_leader_epoch: 0,
                    producer_id: -1,
                    producer_epoch: -1,
                    timestamp_type: TimestampType::Creation,
                    offset: 1000 + i,
                    sequence: -1,
                    timestamp: 5_000 + i,
                    key: Some(Bytes::from(format!("k{i}"))),
                    value: Some(Bytes::from(vec![b'x'; i as usize])),
                    headers: Default::default(),
                    delete_horizon: false,
                })
                .collect();
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(
                &mut buf,
                &records,
                &RecordEncodeOptions {
                    version: 2,
                    compression: kc,
                },
            )
            .unwrap();
            let mut got = Vec::new();
            let next = decode_batches(buf.freeze(), 1020, &mut got).unwrap();
            assert_eq!(next, Some(1050), "{c:?}");
            assert_eq!(got.len(), 30, "records below min_offset are skipped");
            assert_eq!(got[0].offset, 1020);
            assert_eq!(got[0].key.as_deref(), Some(&b"k20"[..]));
            assert_eq!(got[29].value.as_ref().map(Bytes::len), Some(49));
        }
    }

    #[test]
    fn corrupt_truncated_and_unsupported_batches() {
        let batch = build(Compression::None, 3);
        // A flipped byte fails the CRC.
        let mut bad = BytesMut::from(&batch[..]);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            decode_batches(bad.freeze(), 0, &mut Vec::new()),
            Err(Error::Corrupt(_))
        ));
        // A cut-off batch at the end is ignored, the whole one before read.
        let mut two = BytesMut::from(&batch[..]);
        two.extend_from_slice(&batch[..batch.len() - 4]);
        let mut got = Vec::new();
        assert_eq!(decode_batches(two.freeze(), 0, &mut got).unwrap(), Some(3));
        assert_eq!(got.len(), 3);
        // Gzip is not in the native path: the error names the way out.
        let err = BatchBuilder::new(Compression::Gzip)
            .unwrap_err()
            .to_string();
        assert!(err.contains("KafkaProducerBackend::Rdkafka"), "{err}");
    }

    /// Damaged records behind a valid CRC (what a hostile broker could
    /// send), in each codec, are errors, never panics.
    #[test]
    fn damaged_batches_behind_a_valid_crc_never_panic() {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let batch = build(c, 40);
            let rejected = damage(&batch, 6000);
            assert!(rejected > 100, "{c:?}: damage is noticed ({rejected})");
        }
    }

    /// Mutates a byte after the CRC field, fixes the CRC up, sometimes cuts
    /// the batch, and decodes; returns how many were refused.
    fn damage(batch: &Bytes, rounds: u32) -> usize {
        let mut rejected = 0;
        for seed in 0..rounds {
            let mut junk = BytesMut::from(&batch[..]);
            let i = CRC_START + (seed as usize * 7919) % (junk.len() - CRC_START);
            junk[i] = junk[i].wrapping_add(seed as u8 | 1);
            let crc = crc32c::crc32c(&junk[CRC_START..]);
            junk[17..21].copy_from_slice(&crc.to_be_bytes());
            let cut = if seed % 2 == 0 {
                junk.len()
            } else {
                (seed as usize * 104_729) % (junk.len() + 1)
            };
            if decode_batches(junk.freeze().slice(..cut), 0, &mut Vec::new()).is_err() {
                rejected += 1;
            }
        }
        rejected
    }
}
