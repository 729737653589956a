//! Criterion micro-benchmark of the per-window span commit's CPU part: the
//! plan (offset allocation, idempotence checks, span rows) for one window
//! and for a group commit of 64 windows. The PostgreSQL round trip itself is
//! measured end to end by `rutomq-bench` (produce ack latency) and counted
//! on `/metrics` (`rutomq_commit_transactions_total`).
//!
//! `cargo bench -p rutomq-meta --bench commit_plan`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rutomq_meta::commit::{
    plan, BatchRef, LockedPartition, ObjectCommit, PartitionAppend, ProducerFields, TxnView,
};
use uuid::Uuid;

const PARTITIONS: i32 = 8;
const BATCHES_PER_PARTITION: u64 = 4;
const BATCH_BYTES: u64 = 65_600;

fn window(topic: Uuid, idempotent: bool, seq_base: i32) -> ObjectCommit {
    let appends = (0..PARTITIONS)
        .map(|p| PartitionAppend {
            topic_id: topic,
            partition: p,
            batches: (0..BATCHES_PER_PARTITION)
                .map(|i| BatchRef {
                    byte_start: (p as u64 * BATCHES_PER_PARTITION + i) * BATCH_BYTES,
                    byte_len: BATCH_BYTES as u32,
                    offset_count: 64,
                    max_timestamp: 1_700_000_000_000,
                    producer: idempotent.then_some(ProducerFields {
                        producer_id: 1000 + i64::from(p),
                        producer_epoch: 0,
                        base_sequence: seq_base + 64 * i as i32,
                        transactional: false,
                    }),
                })
                .collect(),
        })
        .collect();
    ObjectCommit {
        object_key: format!("objects/1/{seq_base}.rtq"),
        size_bytes: PARTITIONS as u64 * BATCHES_PER_PARTITION * BATCH_BYTES,
        agent_id: 1,
        appends,
        commit_deadline: Instant::now() + Duration::from_secs(3600),
    }
}

fn bench(c: &mut Criterion) {
    let topic = Uuid::new_v4();
    let partitions: HashMap<(Uuid, i32), LockedPartition> = (0..PARTITIONS)
        .map(|p| {
            let locked = LockedPartition {
                next_offset: 1_000_000,
                log_start_offset: 0,
                lso_pin: None,
                abort_seq: 0,
            };
            ((topic, p), locked)
        })
        .collect();
    let txns = TxnView::default();
    let producers = HashMap::new();
    let mut g = c.benchmark_group("commit_plan");
    for (name, idempotent) in [("plain", false), ("idempotent", true)] {
        let one = vec![window(topic, idempotent, 0)];
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("1_window_8x4_batches_{name}"), |b| {
            b.iter(|| plan(&one, &partitions, &producers, &txns))
        });
        let group: Vec<ObjectCommit> = (0..64)
            .map(|w| window(topic, idempotent, w * 256))
            .collect();
        g.throughput(Throughput::Elements(64));
        g.bench_function(format!("64_windows_group_commit_{name}"), |b| {
            b.iter(|| plan(&group, &partitions, &producers, &txns))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
