//! Record batch (magic 2) validation and the few header fields the broker
//! reads or patches. Batches stay as the client sent them (compression
//! included); only `baseOffset` is rewritten on the way out.
//!
//! Layout of the batch header (big-endian):
//! ```text
//! 0  baseOffset i64        8  batchLength i32     12 partitionLeaderEpoch i32
//! 16 magic i8              17 crc u32 (CRC32C of bytes 21..)
//! 21 attributes i16        23 lastOffsetDelta i32 27 baseTimestamp i64
//! 35 maxTimestamp i64      43 producerId i64      51 producerEpoch i16
//! 53 baseSequence i32      57 recordCount i32     61 records...
//! ```

use std::io::Read;

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::limits::DECOMPRESSED_BATCH_BYTES_MAX;

pub const BATCH_HEADER_BYTES: usize = 61;

pub(crate) const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub(crate) const ATTR_LOG_APPEND_TIME: i16 = 0x08;
pub(crate) const ATTR_TRANSACTIONAL: i16 = 0x10;
pub(crate) const ATTR_CONTROL: i16 = 0x20;
/// The base timestamp is a delete horizon (KIP-534), set by compaction.
pub(crate) const ATTR_DELETE_HORIZON: i16 = 0x40;

/// What the broker needs to know of one valid batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchInfo {
    pub offset_count: u32,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Invalid {
    pub code: ErrorCode,
    pub message: String,
    /// Indexes (within the batch) of the records at fault, for Produce's
    /// `record_errors`; empty when the batch as a whole is.
    pub records: Vec<i32>,
    /// What is wrong with each of them.
    pub record_message: &'static str,
}

pub(crate) fn invalid(code: ErrorCode, message: impl Into<String>) -> Invalid {
    Invalid {
        code,
        message: message.into(),
        records: Vec::new(),
        record_message: "",
    }
}

/// What a topic asks of each record of a produced batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordRules {
    /// Every record has a key (a compacted topic).
    pub keys_required: bool,
    /// Record timestamps must lie in this range, ends included (Kafka's
    /// `message.timestamp.before/after.max.ms` around now, for CreateTime
    /// topics); a record without a timestamp (-1) passes.
    pub timestamps: Option<(i64, i64)>,
}

/// What walking a batch's records found.
struct Walk {
    rules: RecordRules,
    base_timestamp: i64,
    count: u64,
    /// The largest timestamp delta (None when there are no records).
    max_delta: Option<i64>,
    /// Indexes of the records with a null key, when keys are required.
    keyless: Vec<i32>,
    /// Indexes of the records with a timestamp out of bounds.
    out_of_time: Vec<i32>,
}

impl Walk {
    fn new(rules: RecordRules, base_timestamp: i64) -> Walk {
        Walk {
            rules,
            base_timestamp,
            count: 0,
            max_delta: None,
            keyless: Vec::new(),
            out_of_time: Vec::new(),
        }
    }

    fn record(&mut self, delta: i64, key_len: Option<i64>) {
        self.max_delta = Some(self.max_delta.map_or(delta, |m| m.max(delta)));
        if key_len.is_some_and(|k| k < 0) {
            self.keyless.push(self.count as i32);
        }
        if let Some((lo, hi)) = self.rules.timestamps {
            let ts = self.base_timestamp.wrapping_add(delta);
            if ts != -1 && (ts < lo || ts > hi) {
                self.out_of_time.push(self.count as i32);
            }
        }
        self.count += 1;
    }
}

pub(crate) fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Validates the `records` of one partition of a Produce request: exactly one
/// magic-2 batch whose CRC, lengths and record count hold, and whose
/// records follow the topic's `rules` (refused ones are listed).
pub fn validate_produce_records(
    records: &[u8],
    batch_bytes_max: usize,
    rules: RecordRules,
) -> Result<BatchInfo, Invalid> {
    if records.len() < BATCH_HEADER_BYTES {
        return Err(invalid(
            ErrorCode::CorruptMessage,
            "record batch shorter than its header",
        ));
    }
    let batch_length = i32_at(records, 8);
    if batch_length < (BATCH_HEADER_BYTES - 12) as i32 {
        return Err(invalid(
            ErrorCode::CorruptMessage,
            "batchLength below the header size",
        ));
    }
    let total = batch_length as usize + 12;
    if total > records.len() {
        return Err(invalid(
            ErrorCode::CorruptMessage,
            "batchLength beyond the records",
        ));
    }
    if total < records.len() {
        return Err(invalid(
            ErrorCode::InvalidRecord,
            "a produce request must hold exactly one record batch per partition",
        ));
    }
    let magic = records[16] as i8;
    if magic != 2 {
        return Err(invalid(
            ErrorCode::UnsupportedVersion,
            format!("record batch magic {magic}; only magic 2 is supported"),
        ));
    }
    if total > batch_bytes_max {
        return Err(invalid(
            ErrorCode::MessageTooLarge,
            format!("record batch of {total} bytes exceeds max.message.bytes {batch_bytes_max}"),
        ));
    }
    let crc = u32::from_be_bytes(records[17..21].try_into().expect("4 bytes"));
    if crc32c::crc32c(&records[21..total]) != crc {
        return Err(invalid(
            ErrorCode::CorruptMessage,
            "record batch CRC32C mismatch",
        ));
    }
    let attributes = i16_at(records, 21);
    let last_offset_delta = i32_at(records, 23);
    let header_max_timestamp = i64_at(records, 35);
    let producer_id = i64_at(records, 43);
    let producer_epoch = i16_at(records, 51);
    let base_sequence = i32_at(records, 53);
    let record_count = i32_at(records, 57);
    if attributes & ATTR_CONTROL != 0 {
        return Err(invalid(
            ErrorCode::InvalidRecord,
            "producers may not send control batches",
        ));
    }
    if record_count <= 0 {
        return Err(invalid(
            ErrorCode::InvalidRecord,
            "record batch holds no records",
        ));
    }
    if last_offset_delta != record_count - 1 {
        return Err(invalid(
            ErrorCode::InvalidRecord,
            format!(
                "lastOffsetDelta {last_offset_delta} does not match recordCount {record_count}"
            ),
        ));
    }
    if producer_id >= 0 && (producer_epoch < 0 || base_sequence < 0) {
        return Err(invalid(
            ErrorCode::InvalidRecord,
            "idempotent batch without producer epoch or base sequence",
        ));
    }
    let codec = attributes & ATTR_COMPRESSION_MASK;
    let body = &records[BATCH_HEADER_BYTES..total];
    let walk = Walk::new(rules, i64_at(records, 27));
    let walk = if codec == 0 {
        count_records_in(body, walk)
    } else {
        count_records(
            records_reader(codec, body)?,
            DECOMPRESSED_BATCH_BYTES_MAX,
            walk,
        )
    }?;
    let (counted, max_delta) = (walk.count, walk.max_delta);
    if counted != record_count as u64 {
        return Err(invalid(
            ErrorCode::CorruptMessage,
            format!("recordCount says {record_count} but the batch holds {counted} records"),
        ));
    }
    if !walk.keyless.is_empty() {
        return Err(Invalid {
            code: ErrorCode::InvalidRecord,
            message: format!(
                "{} of {record_count} records have no key; a compacted topic needs one on every record",
                walk.keyless.len()
            ),
            records: walk.keyless,
            record_message: "a compacted topic needs a key on every record",
        });
    }
    if !walk.out_of_time.is_empty() {
        return Err(Invalid {
            code: ErrorCode::InvalidTimestamp,
            message: format!(
                "{} of {record_count} records have a timestamp outside the topic's \
                 message.timestamp.before.max.ms / after.max.ms of the broker's clock",
                walk.out_of_time.len()
            ),
            records: walk.out_of_time,
            record_message: "timestamp outside the topic's bounds",
        });
    }
    // The records' own timestamps, whatever the header claims (a producer
    // setting the LogAppendTime flag could otherwise pick any max).
    let max_timestamp = match max_delta {
        Some(d) => i64_at(records, 27).wrapping_add(d),
        None => header_max_timestamp,
    };
    Ok(BatchInfo {
        offset_count: record_count as u32,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        transactional: attributes & ATTR_TRANSACTIONAL != 0,
    })
}

/// A copy of a validated batch stamped with the broker's time, as Kafka
/// does for a LogAppendTime topic: the timestamp-type attribute set,
/// `maxTimestamp` = `now_ms` (which consumers then read as every record's
/// timestamp), the CRC recomputed.
pub fn stamp_log_append_time(batch: &[u8], now_ms: i64) -> Bytes {
    let mut b = bytes::BytesMut::from(batch);
    let attributes = i16_at(&b, 21) | ATTR_LOG_APPEND_TIME;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    b[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// The (decompressed) records of a batch body, for codec 0–4.
pub(crate) fn records_reader(codec: i16, body: &[u8]) -> Result<Box<dyn Read + '_>, Invalid> {
    Ok(match codec {
        0 => Box::new(body),
        1 => Box::new(flate2::read::GzDecoder::new(body)),
        2 => Box::new(SnappyReader::new(body)?),
        3 => Box::new(lz4_flex::frame::FrameDecoder::new(body)),
        4 => Box::new(
            zstd::stream::read::Decoder::with_buffer(body)
                .map_err(|e| invalid(ErrorCode::CorruptMessage, format!("zstd: {e}")))?,
        ),
        c => {
            return Err(invalid(
                ErrorCode::InvalidRecord,
                format!("unknown compression codec {c}"),
            ))
        }
    })
}

/// `raw` records compressed with `codec` (0–4) at its default level, as
/// Kafka's cleaner recompresses a batch it rewrites; snappy in the xerial
/// framing the Java client writes (every client reads it).
pub(crate) fn compress(codec: i16, raw: &[u8]) -> Result<Vec<u8>, Invalid> {
    use std::io::Write;
    let failed =
        |e: std::io::Error| invalid(ErrorCode::KafkaStorageError, format!("compression: {e}"));
    Ok(match codec {
        0 => raw.to_vec(),
        1 => {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(raw).map_err(failed)?;
            z.finish().map_err(failed)?
        }
        2 => {
            const XERIAL_BLOCK_BYTES: usize = 32 << 10;
            let mut out = Vec::with_capacity(raw.len() / 2 + 32);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes()); // version
            out.extend_from_slice(&1i32.to_be_bytes()); // compatible version
            let mut enc = snap::raw::Encoder::new();
            for block in raw.chunks(XERIAL_BLOCK_BYTES) {
                let c = enc
                    .compress_vec(block)
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                out.extend_from_slice(&(c.len() as i32).to_be_bytes());
                out.extend_from_slice(&c);
            }
            out
        }
        3 => {
            let mut z = lz4_flex::frame::FrameEncoder::new(Vec::new());
            z.write_all(raw).map_err(failed)?;
            z.finish().map_err(|e| failed(std::io::Error::other(e)))?
        }
        4 => zstd::stream::encode_all(raw, 0).map_err(failed)?,
        c => {
            return Err(invalid(
                ErrorCode::InvalidRecord,
                format!("unknown compression codec {c}"),
            ))
        }
    })
}

/// A record's attributes byte and timestamp delta, read from its start;
/// returns the delta.
fn read_timestamp_delta<R: Read>(record: &mut R) -> Result<i64, Invalid> {
    let truncated = || invalid(ErrorCode::CorruptMessage, "truncated record");
    let mut attributes = [0u8; 1];
    record
        .read_exact(&mut attributes)
        .map_err(|_| truncated())?;
    read_varint(record)?.ok_or_else(truncated)
}

/// The key length of a record read past its timestamp delta (the offset
/// delta comes first); -1 is a null key.
fn read_key_length<R: Read>(record: &mut R) -> Result<i64, Invalid> {
    let truncated = || invalid(ErrorCode::CorruptMessage, "truncated record");
    read_varint(record)?.ok_or_else(truncated)?;
    read_varint(record)?.ok_or_else(truncated)
}

fn read_varint<R: Read>(r: &mut R) -> Result<Option<i64>, Invalid> {
    let mut value: u64 = 0;
    let mut shift = 0;
    loop {
        let mut byte = [0u8; 1];
        match r.read(&mut byte) {
            Ok(0) if shift == 0 => return Ok(None),
            Ok(0) => return Err(invalid(ErrorCode::CorruptMessage, "truncated varint")),
            Ok(_) => {}
            Err(e) => {
                return Err(invalid(
                    ErrorCode::CorruptMessage,
                    format!("decompression failed: {e}"),
                ))
            }
        }
        value |= ((byte[0] & 0x7f) as u64) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(Some(((value >> 1) as i64) ^ -((value & 1) as i64)));
        }
        shift += 7;
        if shift > 63 {
            return Err(invalid(ErrorCode::CorruptMessage, "varint too long"));
        }
    }
}

/// The offset and timestamp of the first record of a stored batch (base
/// offset already known) for which `hit(offset, timestamp)` holds. Reads only each
/// record's length, attributes and deltas; nothing is sized from the wire.
pub fn first_record_matching(
    batch: &[u8],
    base_offset: i64,
    hit: impl Fn(i64, i64) -> bool,
) -> Result<Option<(i64, i64)>, Invalid> {
    if batch.len() < BATCH_HEADER_BYTES {
        return Err(invalid(ErrorCode::CorruptMessage, "stored batch truncated"));
    }
    let codec = i16_at(batch, 21) & ATTR_COMPRESSION_MASK;
    let base_timestamp = i64_at(batch, 27);
    let reader = records_reader(codec, &batch[BATCH_HEADER_BYTES..])?;
    let mut r =
        std::io::BufReader::with_capacity(16 << 10, reader.take(DECOMPRESSED_BATCH_BYTES_MAX));
    while let Some(len) = read_varint(&mut r)? {
        if len <= 1 {
            return Err(invalid(ErrorCode::CorruptMessage, "record too short"));
        }
        let mut counted = (&mut r).take(len as u64);
        let ts_delta = read_timestamp_delta(&mut counted)?;
        let offset_delta = read_varint(&mut counted)?
            .ok_or_else(|| invalid(ErrorCode::CorruptMessage, "truncated record"))?;
        let timestamp = base_timestamp.wrapping_add(ts_delta);
        let offset = base_offset.wrapping_add(offset_delta);
        if hit(offset, timestamp) {
            return Ok(Some((offset, timestamp)));
        }
        std::io::copy(&mut counted, &mut std::io::sink()).map_err(|e| {
            invalid(
                ErrorCode::CorruptMessage,
                format!("decompression failed: {e}"),
            )
        })?;
    }
    Ok(None)
}

/// Counts length-prefixed records in `r` (each record starts with a zigzag
/// varint length), requiring the stream to end exactly after the last one.
/// Counts the records of a batch body and finds the largest timestamp delta
/// among them (Kafka recomputes a batch's max timestamp from its records
/// rather than trusting the header; so does rutomq, for retention and
/// ListOffsets). Returns (records, largest delta or None when empty).
fn count_records<R: Read>(r: R, bytes_max: u64, mut walk: Walk) -> Result<Walk, Invalid> {
    let mut r = std::io::BufReader::with_capacity(16 << 10, r.take(bytes_max + 1));
    let keys = walk.rules.keys_required;
    let mut consumed = 0u64;
    let corrupt = |e: std::io::Error| {
        invalid(
            ErrorCode::CorruptMessage,
            format!("decompression failed: {e}"),
        )
    };
    loop {
        let Some(len) = read_varint(&mut r)? else {
            return Ok(walk);
        };
        if len <= 1 || len > i32::MAX as i64 {
            return Err(invalid(
                ErrorCode::CorruptMessage,
                format!("record length {len}"),
            ));
        }
        consumed += varint_len(len) + len as u64;
        if consumed > bytes_max {
            return Err(invalid(
                ErrorCode::RecordListTooLarge,
                format!("decompressed batch exceeds {bytes_max} bytes"),
            ));
        }
        let mut record = (&mut r).take(len as u64);
        let delta = read_timestamp_delta(&mut record)?;
        let key_len = if keys {
            Some(read_key_length(&mut record)?)
        } else {
            None
        };
        std::io::copy(&mut record, &mut std::io::sink()).map_err(corrupt)?;
        if record.limit() != 0 {
            return Err(invalid(
                ErrorCode::CorruptMessage,
                "record extends past the batch",
            ));
        }
        walk.record(delta, key_len);
    }
}

/// [`count_records`] for an uncompressed body: walks the slice in place
/// (no copy of the record bytes; this runs for every produced record).
fn count_records_in(body: &[u8], mut walk: Walk) -> Result<Walk, Invalid> {
    let truncated = || invalid(ErrorCode::CorruptMessage, "record extends past the batch");
    let keys = walk.rules.keys_required;
    let mut pos = 0usize;
    while pos < body.len() {
        let (len, n) = varint_in(&body[pos..])?;
        pos += n;
        if len <= 1 || len > i32::MAX as i64 {
            return Err(invalid(
                ErrorCode::CorruptMessage,
                format!("record length {len}"),
            ));
        }
        let record = body.get(pos..pos + len as usize).ok_or_else(truncated)?;
        // record[0] is the attributes byte; the timestamp delta, the
        // offset delta and the key length follow.
        let (delta, n) = varint_in(&record[1..])?;
        let key_len = if keys {
            let rest = &record[1 + n..];
            let (_, m) = varint_in(rest)?;
            Some(varint_in(&rest[m..])?.0)
        } else {
            None
        };
        walk.record(delta, key_len);
        pos += len as usize;
    }
    Ok(walk)
}

/// A zigzag varint at the start of `b`: (value, bytes it took).
pub(crate) fn varint_in(b: &[u8]) -> Result<(i64, usize), Invalid> {
    let mut value: u64 = 0;
    for (i, &byte) in b.iter().take(10).enumerate() {
        value |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((((value >> 1) as i64) ^ -((value & 1) as i64), i + 1));
        }
    }
    Err(invalid(
        ErrorCode::CorruptMessage,
        if b.len() < 10 {
            "truncated varint"
        } else {
            "varint too long"
        },
    ))
}

/// Bytes of the zigzag varint encoding of `v`.
fn varint_len(v: i64) -> u64 {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - z.leading_zeros() as u64).max(1).div_ceil(7)
}

/// Kafka's snappy: either xerial framing (magic, version, then
/// length-prefixed raw snappy blocks) as the Java client writes, or one raw
/// snappy block.
struct SnappyReader<'a> {
    rest: &'a [u8],
    xerial: bool,
    block: std::io::Cursor<Vec<u8>>,
}

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

impl<'a> SnappyReader<'a> {
    fn new(body: &'a [u8]) -> Result<Self, Invalid> {
        if body.len() >= 16 && body.starts_with(XERIAL_MAGIC) {
            Ok(SnappyReader {
                rest: &body[16..],
                xerial: true,
                block: std::io::Cursor::new(Vec::new()),
            })
        } else {
            Ok(SnappyReader {
                rest: body,
                xerial: false,
                block: std::io::Cursor::new(Vec::new()),
            })
        }
    }

    fn next_block(&mut self) -> std::io::Result<bool> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        let block = if self.xerial {
            if self.rest.len() < 4 {
                return Err(std::io::Error::other("truncated xerial block length"));
            }
            let n = u32::from_be_bytes(self.rest[..4].try_into().expect("4 bytes")) as usize;
            if self.rest.len() < 4 + n {
                return Err(std::io::Error::other("truncated xerial block"));
            }
            let b = &self.rest[4..4 + n];
            self.rest = &self.rest[4 + n..];
            b
        } else {
            std::mem::take(&mut self.rest)
        };
        let len = snap::raw::decompress_len(block).map_err(std::io::Error::other)?;
        if len as u64 > DECOMPRESSED_BATCH_BYTES_MAX {
            return Err(std::io::Error::other("snappy block too large"));
        }
        let out = snap::raw::Decoder::new()
            .decompress_vec(block)
            .map_err(std::io::Error::other)?;
        self.block = std::io::Cursor::new(out);
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.block.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            if !self.next_block()? {
                return Ok(0);
            }
        }
    }
}

/// One batch found while walking stored bytes.
pub struct StoredBatch {
    pub bytes: Bytes,
    pub last_offset_delta: i32,
    pub max_timestamp: i64,
}

/// What a reader needs of a stored batch's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHead {
    pub last_offset_delta: i32,
    pub control: bool,
    pub transactional: bool,
    pub producer_id: i64,
}

/// A stored batch's header (`None` when shorter than one).
pub fn batch_head(batch: &[u8]) -> Option<BatchHead> {
    if batch.len() < BATCH_HEADER_BYTES {
        return None;
    }
    let attributes = i16_at(batch, 21);
    Some(BatchHead {
        last_offset_delta: i32_at(batch, 23),
        control: attributes & ATTR_CONTROL != 0,
        transactional: attributes & ATTR_TRANSACTIONAL != 0,
        producer_id: i64_at(batch, 43),
    })
}

/// Walks consecutive batches in bytes read back from an object. Lengths are
/// always checked; CRCs when `verify_crc` (bytes that come back from the
/// object store: validated at produce time, checked again on this side of
/// the boundary; bytes still in this agent's memory need no second check).
pub fn walk_batches(
    bytes: Bytes,
    verify_crc: bool,
) -> impl Iterator<Item = Result<StoredBatch, Invalid>> {
    walk_batch_chunks(vec![bytes], verify_crc)
}

/// [`walk_batches`] over bytes held in consecutive chunks (read blocks): a
/// batch within one chunk is a slice of it, one that straddles two is
/// copied into a buffer of its own.
pub fn walk_batch_chunks(
    chunks: Vec<Bytes>,
    verify_crc: bool,
) -> impl Iterator<Item = Result<StoredBatch, Invalid>> {
    let mut rest = Chunks::new(chunks);
    std::iter::from_fn(move || {
        if rest.len == 0 {
            return None;
        }
        if rest.len < BATCH_HEADER_BYTES {
            rest.clear();
            return Some(Err(invalid(
                ErrorCode::CorruptMessage,
                "stored batch truncated",
            )));
        }
        let mut head = [0u8; 12];
        rest.peek(&mut head);
        let total = i32_at(&head, 8) as i64 + 12;
        if total < BATCH_HEADER_BYTES as i64 || total as usize > rest.len {
            rest.clear();
            return Some(Err(invalid(
                ErrorCode::CorruptMessage,
                "stored batch length invalid",
            )));
        }
        let b = rest.take(total as usize);
        let crc = u32::from_be_bytes(b[17..21].try_into().expect("4 bytes"));
        if verify_crc && crc32c::crc32c(&b[21..]) != crc {
            rest.clear();
            return Some(Err(invalid(
                ErrorCode::CorruptMessage,
                "stored batch CRC mismatch",
            )));
        }
        Some(Ok(StoredBatch {
            last_offset_delta: i32_at(&b, 23),
            max_timestamp: i64_at(&b, 35),
            bytes: b,
        }))
    })
}

/// Bytes in consecutive chunks, consumed from the front.
struct Chunks {
    chunks: std::collections::VecDeque<Bytes>,
    /// Bytes left, in all chunks.
    len: usize,
}

impl Chunks {
    fn new(chunks: Vec<Bytes>) -> Chunks {
        let chunks: std::collections::VecDeque<Bytes> =
            chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let len = chunks.iter().map(Bytes::len).sum();
        Chunks { chunks, len }
    }

    fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// Copies the first `out.len()` bytes (at most `len` of them) into
    /// `out`.
    fn peek(&self, out: &mut [u8]) {
        if let Some(front) = self.chunks.front().filter(|f| f.len() >= out.len()) {
            out.copy_from_slice(&front[..out.len()]);
            return;
        }
        let mut at = 0;
        for c in &self.chunks {
            let n = (out.len() - at).min(c.len());
            out[at..at + n].copy_from_slice(&c[..n]);
            at += n;
            if at == out.len() {
                break;
            }
        }
    }

    /// The first `n` bytes (at most `len`): a slice of the first chunk when
    /// it holds them all, else a copy.
    fn take(&mut self, n: usize) -> Bytes {
        self.len -= n;
        let Some(front) = self.chunks.front_mut() else {
            return Bytes::new();
        };
        if front.len() >= n {
            let b = front.split_to(n);
            if front.is_empty() {
                self.chunks.pop_front();
            }
            return b;
        }
        let mut out = bytes::BytesMut::with_capacity(n);
        while out.len() < n {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let k = (n - out.len()).min(front.len());
            out.extend_from_slice(&front.split_to(k));
            if front.is_empty() {
                self.chunks.pop_front();
            }
        }
        out.freeze()
    }
}

/// A transaction marker: the control batch that ends a transaction in one
/// partition, taking one offset there (Kafka's `EndTransactionMarker`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// COMMIT, or ABORT.
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub timestamp_ms: i64,
}

/// Bytes of a marker batch (header and its one control record).
pub const TXN_MARKER_BATCH_BYTES: usize = BATCH_HEADER_BYTES + 17;

/// The marker's record batch, base offset 0 (patched like any stored batch
/// on the way out): magic 2, attributes transactional | control, no
/// sequence, one record whose key is (version 0, type 0 ABORT / 1 COMMIT)
/// and whose value is (version 0, coordinator epoch). A marker is fully
/// determined by its fields, so it needs no object: Fetch makes it.
pub fn txn_marker_batch(m: &TxnMarker) -> Bytes {
    let mut b = Vec::with_capacity(TXN_MARKER_BATCH_BYTES);
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((TXN_MARKER_BATCH_BYTES - 12) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // CRC, below
    b.extend_from_slice(&(ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    b.extend_from_slice(&m.timestamp_ms.to_be_bytes()); // base timestamp
    b.extend_from_slice(&m.timestamp_ms.to_be_bytes()); // max timestamp
    b.extend_from_slice(&m.producer_id.to_be_bytes());
    b.extend_from_slice(&m.producer_epoch.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&1i32.to_be_bytes()); // records
                                              // The record, its varints zigzag-encoded: length 16, attributes,
                                              // timestamp delta 0, offset delta 0, key length 4, key, value length 6,
                                              // value, no headers.
    b.extend_from_slice(&[0x20, 0, 0, 0, 0x08, 0, 0, 0, u8::from(m.commit), 0x0c, 0, 0]);
    b.extend_from_slice(&m.coordinator_epoch.to_be_bytes());
    b.push(0);
    debug_assert_eq!(b.len(), TXN_MARKER_BATCH_BYTES);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// The header fields of a stored batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub leader_epoch: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl Header {
    pub fn parse(b: &[u8]) -> Result<Header, Invalid> {
        if b.len() < BATCH_HEADER_BYTES || b[16] != 2 {
            return Err(invalid(
                ErrorCode::CorruptMessage,
                "stored batch is not a magic 2 batch",
            ));
        }
        Ok(Header {
            leader_epoch: i32_at(b, 12),
            attributes: i16_at(b, 21),
            last_offset_delta: i32_at(b, 23),
            base_timestamp: i64_at(b, 27),
            max_timestamp: i64_at(b, 35),
            producer_id: i64_at(b, 43),
            producer_epoch: i16_at(b, 51),
            base_sequence: i32_at(b, 53),
            record_count: i32_at(b, 57),
        })
    }

    pub fn codec(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }

    pub fn transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// The delete horizon a previous pass set, if any.
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }
}

/// A magic 2 batch of these header fields and (compressed) records.
pub(crate) fn write_batch(base_offset: i64, h: &Header, records: &[u8]) -> Bytes {
    let mut b = header_bytes(base_offset, h, records.len());
    b.extend_from_slice(records);
    seal(b)
}

/// A batch's header fields, `records_len` bytes of records to follow
/// (written by the caller, then [`seal`]ed).
fn header_bytes(base_offset: i64, h: &Header, records_len: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(BATCH_HEADER_BYTES + records_len);
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((BATCH_HEADER_BYTES - 12 + records_len) as i32).to_be_bytes());
    b.extend_from_slice(&h.leader_epoch.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&[0; 4]); // CRC, set by `seal`
    b.extend_from_slice(&h.attributes.to_be_bytes());
    b.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    b.extend_from_slice(&h.base_timestamp.to_be_bytes());
    b.extend_from_slice(&h.max_timestamp.to_be_bytes());
    b.extend_from_slice(&h.producer_id.to_be_bytes());
    b.extend_from_slice(&h.producer_epoch.to_be_bytes());
    b.extend_from_slice(&h.base_sequence.to_be_bytes());
    b.extend_from_slice(&h.record_count.to_be_bytes());
    b
}

/// The batch with its CRC set.
fn seal(mut b: Vec<u8>) -> Bytes {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

pub(crate) fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// A fresh batch of one record (base offset 0, no producer, no
/// compression, timestamp `timestamp_ms`, as LogAppendTime when
/// `log_append_time`), as a producer would send it: what the agent itself
/// writes into a topic, built in one buffer, with the facts the produce
/// buffer needs (what validating it would find).
pub fn one_record_batch(
    key: &[u8],
    value: &[u8],
    headers: &[(&str, &[u8])],
    timestamp_ms: i64,
    log_append_time: bool,
) -> (Bytes, BatchInfo) {
    let field = |n: usize| varint_len(n as i64) as usize + n;
    // Attributes, timestamp delta 0, offset delta 0, key, value, headers.
    let body = 3
        + field(key.len())
        + field(value.len())
        + varint_len(headers.len() as i64) as usize
        + headers
            .iter()
            .map(|(k, v)| field(k.len()) + field(v.len()))
            .sum::<usize>();
    let h = Header {
        leader_epoch: 0,
        attributes: if log_append_time {
            ATTR_LOG_APPEND_TIME
        } else {
            0
        },
        last_offset_delta: 0,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: 1,
    };
    let mut b = header_bytes(0, &h, field(body));
    put_varint(&mut b, body as i64);
    b.extend_from_slice(&[0, 0, 0]); // attributes, timestamp and offset deltas
    let put = |b: &mut Vec<u8>, bytes: &[u8]| {
        put_varint(b, bytes.len() as i64);
        b.extend_from_slice(bytes);
    };
    put(&mut b, key);
    put(&mut b, value);
    put_varint(&mut b, headers.len() as i64);
    for (k, v) in headers {
        put(&mut b, k.as_bytes());
        put(&mut b, v);
    }
    let info = BatchInfo {
        offset_count: 1,
        max_timestamp: timestamp_ms,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        transactional: false,
    };
    (seal(b), info)
}

/// Writes `batch` into `out` with its baseOffset set to `base_offset` (the
/// field lies outside the CRC).
pub fn put_with_base_offset(out: &mut bytes::BytesMut, batch: &[u8], base_offset: i64) {
    out.extend_from_slice(&base_offset.to_be_bytes());
    out.extend_from_slice(&batch[8..]);
}

#[cfg(test)]
pub mod tests {
    use super::*;

    fn varint(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return;
            }
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
    }

    /// A minimal uncompressed batch of `n` records with 1-byte values.
    pub fn batch(n: i32, claimed: i32) -> Vec<u8> {
        keyed_batch(&vec![None; n as usize], claimed, false)
    }

    /// A batch of records with these keys (None: a null key) and 1-byte
    /// values, gzip-compressed when `gzip`.
    fn keyed_batch(keys: &[Option<&[u8]>], claimed: i32, gzip: bool) -> Vec<u8> {
        let mut records = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let mut r = Vec::new();
            r.push(0); // attributes
            varint(&mut r, 0); // timestamp delta
            varint(&mut r, i as i64); // offset delta
            match key {
                None => varint(&mut r, -1),
                Some(k) => {
                    varint(&mut r, k.len() as i64);
                    r.extend_from_slice(k);
                }
            }
            varint(&mut r, 1);
            r.push(b'x');
            varint(&mut r, 0); // headers
            varint(&mut records, r.len() as i64);
            records.extend(r);
        }
        if gzip {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut z, &records).unwrap();
            records = z.finish().unwrap();
        }
        let mut b = vec![0u8; BATCH_HEADER_BYTES];
        b[16] = 2;
        b[21..23].copy_from_slice(&(gzip as i16).to_be_bytes());
        b[23..27].copy_from_slice(&(claimed - 1).to_be_bytes());
        b[35..43].copy_from_slice(&1000i64.to_be_bytes());
        b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
        b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        b[57..61].copy_from_slice(&claimed.to_be_bytes());
        b.extend(records);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    const KEYS: RecordRules = RecordRules {
        keys_required: true,
        timestamps: None,
    };

    #[test]
    fn records_out_of_the_timestamp_bounds_are_listed() {
        // Records at base 0 + deltas 0: timestamp 0.
        let b = batch(3, 3);
        let within = RecordRules {
            keys_required: false,
            timestamps: Some((0, 10)),
        };
        assert!(validate_produce_records(&b, 1 << 20, within).is_ok());
        let after = RecordRules {
            keys_required: false,
            timestamps: Some((1, 10)),
        };
        let e = validate_produce_records(&b, 1 << 20, after).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidTimestamp);
        assert_eq!(e.records, vec![0, 1, 2]);
    }

    #[test]
    fn keyless_records_are_listed_when_keys_are_required() {
        for gzip in [false, true] {
            let keys: [Option<&[u8]>; 4] = [Some(b"a"), None, Some(b""), None];
            let b = keyed_batch(&keys, 4, gzip);
            assert!(validate_produce_records(&b, 1 << 20, RecordRules::default()).is_ok());
            let e = validate_produce_records(&b, 1 << 20, KEYS).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRecord);
            // An empty key is a key; only null ones are refused.
            assert_eq!(e.records, vec![1, 3], "gzip {gzip}");
            let all: [Option<&[u8]>; 2] = [Some(b"k"), Some(b"l")];
            assert!(validate_produce_records(&keyed_batch(&all, 2, gzip), 1 << 20, KEYS).is_ok());
        }
    }

    #[test]
    fn valid_batch() {
        let info = validate_produce_records(&batch(3, 3), 1 << 20, RecordRules::default()).unwrap();
        assert_eq!(info.offset_count, 3);
        // The header claims 1000; the records (base 0, deltas 0) say 0, and
        // the records win, as in Kafka.
        assert_eq!(info.max_timestamp, 0);
        assert_eq!(info.producer_id, -1);
        // Base timestamp 5000: every record is at 5000.
        let mut b = batch(3, 3);
        b[27..35].copy_from_slice(&5000i64.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            validate_produce_records(&b, 1 << 20, RecordRules::default())
                .unwrap()
                .max_timestamp,
            5000
        );
    }

    #[test]
    fn bad_crc_is_corrupt() {
        let mut b = batch(2, 2);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(
            validate_produce_records(&b, 1 << 20, RecordRules::default())
                .unwrap_err()
                .code,
            ErrorCode::CorruptMessage
        );
    }

    #[test]
    fn record_count_lie_is_rejected() {
        let e = validate_produce_records(&batch(2, 1_000_000), 1 << 20, RecordRules::default())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::CorruptMessage);
    }

    #[test]
    fn too_large_and_truncated() {
        let b = batch(3, 3);
        assert_eq!(
            validate_produce_records(&b, 64, RecordRules::default())
                .unwrap_err()
                .code,
            ErrorCode::MessageTooLarge
        );
        assert_eq!(
            validate_produce_records(&b[..b.len() - 1], 1 << 20, RecordRules::default())
                .unwrap_err()
                .code,
            ErrorCode::CorruptMessage
        );
        assert_eq!(
            validate_produce_records(&b[..10], 1 << 20, RecordRules::default())
                .unwrap_err()
                .code,
            ErrorCode::CorruptMessage
        );
    }

    #[test]
    fn two_batches_are_invalid() {
        let mut b = batch(1, 1);
        b.extend(batch(1, 1));
        assert_eq!(
            validate_produce_records(&b, 1 << 20, RecordRules::default())
                .unwrap_err()
                .code,
            ErrorCode::InvalidRecord
        );
    }

    #[test]
    fn first_record_by_timestamp() {
        // batch(): base timestamp 0 in the header, every record delta 0.
        let b = batch(3, 3);
        assert_eq!(
            first_record_matching(&b, 100, |_, ts| ts >= 0).unwrap(),
            Some((100, 0))
        );
        assert_eq!(
            first_record_matching(&b, 100, |_, ts| ts > 0).unwrap(),
            None
        );
        // Records before a log start inside the batch are passed over.
        assert_eq!(
            first_record_matching(&b, 100, |o, ts| o >= 102 && ts >= 0).unwrap(),
            Some((102, 0))
        );
    }

    /// Random record bodies behind a valid header and CRC, so the record
    /// walk itself (not the CRC check) meets the garbage: it must reject or
    /// accept, never panic, for every codec.
    #[test]
    fn random_bodies_with_valid_crc_never_panic() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut accepted = 0;
        for i in 0..20_000 {
            // The header of a 3-record batch.
            let mut b = batch(3, 3);
            b.truncate(BATCH_HEADER_BYTES);
            let len = (next() % 300) as usize;
            // Half the bodies start from a valid record, then get bytes flipped.
            let mut body: Vec<u8> = if i % 2 == 0 {
                batch(3, 3)[BATCH_HEADER_BYTES..].to_vec()
            } else {
                (0..len).map(|_| next() as u8).collect()
            };
            for _ in 0..(next() % 4) {
                if !body.is_empty() {
                    let at = (next() as usize) % body.len();
                    body[at] = next() as u8;
                }
            }
            b.extend(body);
            let codec = (next() % 5) as i16;
            b[21..23].copy_from_slice(&codec.to_be_bytes());
            let batch_len = (b.len() - 12) as i32;
            b[8..12].copy_from_slice(&batch_len.to_be_bytes());
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            accepted +=
                validate_produce_records(&b, 1 << 20, RecordRules::default()).is_ok() as u32;
        }
        // Some got through the CRC and the whole walk (unflipped bodies).
        assert!(accepted > 0);
    }

    #[test]
    fn walk_and_patch() {
        let mut both = batch(2, 2);
        both.extend(batch(3, 3));
        let batches: Vec<_> = walk_batches(Bytes::from(both), true)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[1].last_offset_delta, 2);
        let mut out = bytes::BytesMut::new();
        put_with_base_offset(&mut out, &batches[1].bytes, 42);
        assert_eq!(i64_at(&out, 0), 42);
        assert!(
            validate_produce_records(&out, 1 << 20, RecordRules::default()).is_ok(),
            "CRC still holds"
        );
    }

    /// Batches in chunks split anywhere walk as in one buffer: a batch
    /// within a chunk is a slice of it (the same memory), one across chunks
    /// a copy; damage is reported as for one buffer.
    #[test]
    fn walk_batch_chunks_slices_within_chunks_and_copies_across() {
        let mut all = Vec::new();
        for n in [2, 3, 1, 4] {
            all.extend(batch(n, n));
        }
        let all = Bytes::from(all);
        let whole: Vec<_> = walk_batches(all.clone(), true)
            .collect::<Result<_, _>>()
            .unwrap();
        for cuts in [
            vec![],
            vec![5],
            vec![whole[0].bytes.len()],
            vec![7, 100, 101, 150],
        ] {
            let mut chunks = Vec::new();
            let mut at = 0;
            for &c in cuts.iter().chain([all.len()].iter()) {
                chunks.push(all.slice(at..c.min(all.len())));
                at = c.min(all.len());
            }
            let walked: Vec<_> = walk_batch_chunks(chunks.clone(), true)
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(walked.len(), whole.len(), "cuts {cuts:?}");
            let mut start = 0;
            for (w, b) in walked.iter().zip(&whole) {
                assert_eq!(w.bytes, b.bytes, "cuts {cuts:?}");
                assert_eq!(w.last_offset_delta, b.last_offset_delta);
                let end = start + b.bytes.len();
                let within = cuts.iter().all(|&c| c <= start || c >= end);
                let same = w.bytes.as_ptr() == all[start..].as_ptr();
                assert_eq!(
                    same, within,
                    "cuts {cuts:?}: batch at {start} sliced iff within a chunk"
                );
                start = end;
            }
        }
        // Cut short, or a length running past the end: refused as for one
        // buffer.
        let short = vec![all.slice(..30), all.slice(30..60)];
        assert!(walk_batch_chunks(short, true).any(|b| b.is_err()));
        let mut bad = all.to_vec();
        bad[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let bad = Bytes::from(bad);
        assert!(walk_batch_chunks(vec![bad.slice(..9), bad.slice(9..)], true).any(|b| b.is_err()));
    }

    #[test]
    fn txn_markers_decode_as_kafka_control_batches() {
        use kafka_protocol::records::RecordBatchDecoder;
        for commit in [false, true] {
            let m = TxnMarker {
                producer_id: 4242,
                producer_epoch: 7,
                commit,
                coordinator_epoch: 3,
                timestamp_ms: 1_700_000_000_123,
            };
            let bytes = txn_marker_batch(&m);
            assert_eq!(bytes.len(), 78, "Kafka's marker batch is 78 bytes");
            let mut out = bytes::BytesMut::new();
            put_with_base_offset(&mut out, &bytes, 99);
            let walked: Vec<_> = walk_batches(out.clone().freeze(), true).collect();
            assert_eq!(walked.len(), 1);
            let batch = walked
                .into_iter()
                .next()
                .unwrap()
                .expect("CRC and lengths valid");
            assert_eq!(batch.last_offset_delta, 0);
            assert_eq!(batch.max_timestamp, m.timestamp_ms);
            let set =
                RecordBatchDecoder::decode(&mut out.freeze()).expect("the library decodes it");
            assert_eq!(set.records.len(), 1);
            let r = &set.records[0];
            assert!(r.control);
            assert!(r.transactional);
            assert_eq!(r.offset, 99);
            assert_eq!(r.producer_id, 4242);
            assert_eq!(r.producer_epoch, 7);
            assert_eq!(r.sequence, -1);
            assert_eq!(r.timestamp, m.timestamp_ms);
            assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, u8::from(commit)][..]));
            assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 3][..]));
            assert!(r.headers.is_empty());
        }
    }

    #[test]
    fn one_record_batches_are_what_validation_and_the_library_find() {
        use kafka_protocol::records::RecordBatchDecoder;
        let value = vec![7u8; 300]; // a two-byte length varint
        let headers: [(&str, &[u8]); 2] = [("client_id", b"app"), ("empty", b"")];
        let (plain, info) = one_record_batch(b"key", &value, &headers, 1_700_000_000_000, false);
        let found = validate_produce_records(&plain, 1 << 20, RecordRules::default()).unwrap();
        assert_eq!(found, info, "the facts returned are what validation finds");
        let set = RecordBatchDecoder::decode(&mut plain.clone()).expect("the library decodes it");
        let r = &set.records[0];
        assert_eq!(r.key.as_deref(), Some(&b"key"[..]));
        assert_eq!(r.value.as_deref(), Some(&value[..]));
        assert_eq!(r.timestamp, 1_700_000_000_000);
        assert_eq!(r.headers.len(), 2);
        // Built as LogAppendTime: the same bytes the produce path's stamp makes.
        let (stamped, _) = one_record_batch(b"key", &value, &headers, 1_700_000_000_000, true);
        assert_eq!(stamped, stamp_log_append_time(&plain, 1_700_000_000_000));
    }
}
