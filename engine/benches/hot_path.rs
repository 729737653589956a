//! Criterion micro-benchmarks of the produce and fetch hot path:
//! request decode, batch validation (CRC32C + record walk), and building a
//! fetch response (base offsets patched, response encoded).
//!
//! `cargo bench -p rutomq --bench hot_path`

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchResponse, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use rutomq::api::{decode_body, encode, encode_request, parse_request, Parsed};
use rutomq::records::{put_with_base_offset, validate_produce_records};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 64;
const PARTITIONS: i32 = 8;

fn batch(compression: Compression) -> Bytes {
    let value = Bytes::from(
        (0..RECORD_BYTES)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>(),
    );
    rutomq_bench::record_batch(
        RECORDS_PER_BATCH,
        &value,
        1_700_000_000_000,
        compression,
        None,
        false,
    )
    .expect("encode batch")
}

fn produce_frame(batch: &Bytes) -> Bytes {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("bench")))
            .with_partition_data(
                (0..PARTITIONS)
                    .map(|p| {
                        PartitionProduceData::default()
                            .with_index(p)
                            .with_records(Some(batch.clone()))
                    })
                    .collect(),
            )]);
    encode_request(9, &req).expect("encode produce")
}

fn decode(c: &mut Criterion) {
    let frame = produce_frame(&batch(Compression::None));
    let mut g = c.benchmark_group("request_decode");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("produce_v9_8x64KiB", |b| {
        b.iter(|| match parse_request(frame.clone()) {
            Ok(Parsed::Request(req, body)) => decode_body(&req, body).expect("the body decodes"),
            _ => panic!("the frame parses"),
        })
    });
    g.finish();
}

fn validate(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch_validate");
    for (name, codec) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let b = batch(codec);
        g.throughput(Throughput::Bytes((RECORDS_PER_BATCH * RECORD_BYTES) as u64));
        g.bench_function(format!("64x1KiB_{name}"), |bench| {
            bench.iter(|| validate_produce_records(&b, 1 << 20, Default::default()).expect("valid"))
        });
    }
    g.finish();
}

fn fetch_response(c: &mut Criterion) {
    let stored = batch(Compression::None);
    let batches_per_partition = 16;
    let total = stored.len() * batches_per_partition * PARTITIONS as usize;
    let mut g = c.benchmark_group("fetch_response");
    g.throughput(Throughput::Bytes(total as u64));
    g.bench_function("8_partitions_x_16_batches_64KiB", |b| {
        b.iter_batched(
            || (),
            |()| {
                let partitions = (0..PARTITIONS)
                    .map(|p| {
                        let mut records =
                            BytesMut::with_capacity(stored.len() * batches_per_partition);
                        for i in 0..batches_per_partition {
                            put_with_base_offset(
                                &mut records,
                                &stored,
                                (i * RECORDS_PER_BATCH) as i64,
                            );
                        }
                        PartitionData::default()
                            .with_partition_index(p)
                            .with_high_watermark(1 << 20)
                            .with_records(Some(records.freeze()))
                    })
                    .collect();
                let resp =
                    FetchResponse::default()
                        .with_responses(vec![FetchableTopicResponse::default()
                            .with_topic(TopicName(StrBytes::from_static_str("bench")))
                            .with_partitions(partitions)]);
                encode(1, 12, &resp).expect("encodes")
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, decode, validate, fetch_response);
criterion_main!(benches);
