//! What the load generator shares with the micro-benchmarks: the record
//! batch v2 header layout and a builder of uncompressed or compressed
//! batches of identical records; and what the benchmark binaries share to
//! measure a run ([`stats`]).

pub mod stats;

use anyhow::Result;
use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Byte positions in a record batch v2 header.
pub mod layout {
    pub const BATCH_LENGTH_AT: usize = 8;
    pub const CRC_AT: usize = 17;
    /// The CRC covers the batch from here (the attributes) to its end.
    pub const CRC_FROM: usize = 21;
    pub const ATTRIBUTES_AT: usize = 21;
    pub const LAST_OFFSET_DELTA_AT: usize = 23;
    pub const FIRST_TIMESTAMP_AT: usize = 27;
    pub const MAX_TIMESTAMP_AT: usize = 35;
    pub const RECORDS_COUNT_AT: usize = 57;
    pub const HEADER_LEN: usize = 61;
}

/// The producer a batch is written by: its id, epoch and first sequence,
/// and whether the batch belongs to a transaction.
#[derive(Clone, Copy, Debug)]
pub struct BatchProducer {
    pub id: i64,
    pub epoch: i16,
    pub sequence: i32,
    pub transactional: bool,
}

/// `size` bytes, half random and half zeros: compressible about 2:1 like
/// typical payloads.
pub fn payload(size: usize) -> Bytes {
    let mut value = vec![0u8; size];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut value);
    value[size / 2..].fill(0);
    Bytes::from(value)
}

/// One batch of `count` records holding `value`, all at `timestamp`,
/// written by `producer` (none: no producer id). Keyless, or with `keyed`
/// each record's key is its index in the batch (`k00000000`, ...), as a
/// compacted topic needs: every such batch overwrites the same keys.
pub fn record_batch(
    count: usize,
    value: &Bytes,
    timestamp: i64,
    compression: Compression,
    producer: Option<BatchProducer>,
    keyed: bool,
) -> Result<Bytes> {
    // offset - sequence must be the same for every record, or the encoder
    // splits them into batches; without a producer the base sequence is -1.
    let (id, epoch, base_sequence, transactional) = match producer {
        Some(p) => (p.id, p.epoch, p.sequence, p.transactional),
        None => (-1, -1, -1, false),
    };
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp,
            key: keyed.then(|| Bytes::from(format!("k{i:08}"))),
            value: Some(value.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )?;
    Ok(buf.freeze())
}

/// `(topic, item)` pairs grouped by topic, topics in first-seen order.
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut out: Vec<(String, Vec<T>)> = Vec::new();
    for (topic, item) in items {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, v)) => v.push(item),
            None => out.push((topic, vec![item])),
        }
    }
    out
}
