//! Throughput of the datum-mq client backends against a running broker:
//! `produce` sends `--records` records of `--record-size` bytes (keyless,
//! so the native producer's sticky batches and librdkafka's own sticky
//! partitioner fill whole batches) and waits for every delivery;
//! `consume` reads them back through a KafkaSource (either backend), acknowledging
//! each. Prints one JSON line with the figures.
//!
//!   datum-mq-bench produce --bootstrap 127.0.0.1:9092 --topic t --backend native --in-flight 1
//!   datum-mq-bench consume --bootstrap 127.0.0.1:9092 --topic t --records N --backend rdkafka

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Parser;
use datum_mq::{
    AutoOffsetReset, Compression, KafkaConsumerBackend, KafkaConsumerSettings, KafkaProducer,
    KafkaProducerBackend, KafkaProducerSettings, KafkaSource, ProducerRecord,
};

#[derive(Parser, Debug)]
struct Args {
    /// produce | consume
    mode: String,
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    #[arg(long)]
    topic: String,
    /// native | rdkafka (produce)
    #[arg(long, default_value = "native")]
    backend: String,
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    #[arg(long, default_value_t = 1_000_000)]
    batch_size: usize,
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Give each record a distinct key (spread over the partitions by
    /// hash) instead of none (sticky batches).
    #[arg(long)]
    keyed: bool,
    /// none | lz4 | zstd | gzip | snappy
    #[arg(long, default_value = "none")]
    compression: String,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let a = Args::parse();
    match a.mode.as_str() {
        "produce" => produce(&a).await,
        "consume" => consume(&a).await,
        m => bail!("mode {m}: produce or consume"),
    }
}

async fn produce(a: &Args) -> Result<()> {
    let backend = match a.backend.as_str() {
        "native" => KafkaProducerBackend::Native,
        "rdkafka" => KafkaProducerBackend::Rdkafka,
        b => bail!("backend {b}: native or rdkafka"),
    };
    let compression = match a.compression.as_str() {
        "none" => Compression::None,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        c => bail!("compression {c}"),
    };
    let p = KafkaProducer::new(
        KafkaProducerSettings::new(&a.bootstrap)
            .with_backend(backend)
            .with_compression(compression)
            .with_max_in_flight_requests_per_connection(a.in_flight)
            .with_batch_size_bytes(a.batch_size)
            .with_buffer_memory_bytes(256 << 20)
            .with_linger(Duration::from_millis(a.linger_ms)),
    )
    .await
    .context("producer")?;
    let value = Bytes::from(vec![b'x'; a.record_size]);
    let started = Instant::now();
    // Deliveries are awaited by a second task, so sending never waits on
    // them (only on the producer's buffer).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, datum_mq::Delivery)>(1 << 16);
    let waiter = tokio::spawn(async move {
        let mut lat = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
        let mut n = 0usize;
        while let Some((sent, d)) = rx.recv().await {
            d.await?;
            let _ = lat.record(sent.elapsed().as_micros() as u64);
            n += 1;
        }
        Ok::<_, anyhow::Error>((n, lat))
    });
    for i in 0..a.records {
        let mut r = ProducerRecord::new(&a.topic).with_value(value.clone());
        if a.keyed {
            r = r.with_key(i.to_string());
        }
        let d = p.send(r).await?;
        tx.send((Instant::now(), d)).await.ok();
    }
    drop(tx);
    let (n, lat) = waiter.await??;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "mode": if a.keyed { "produce-keyed" } else { "produce" }, "backend": a.backend, "in_flight": a.in_flight,
            "compression": a.compression, "records": n, "record_size": a.record_size,
            "seconds": secs, "records_per_sec": n as f64 / secs,
            "mib_per_sec": (n * a.record_size) as f64 / secs / 1048576.0,
            "delivery_ms_p50": lat.value_at_quantile(0.5) as f64 / 1000.0,
            "delivery_ms_p99": lat.value_at_quantile(0.99) as f64 / 1000.0,
        })
    );
    Ok(())
}

async fn consume(a: &Args) -> Result<()> {
    let backend = match a.backend.as_str() {
        "native" => KafkaConsumerBackend::Native,
        "rdkafka" => KafkaConsumerBackend::Rdkafka,
        b => bail!("backend {b}: native or rdkafka"),
    };
    let group = format!("datum-mq-bench-{}", std::process::id());
    let mut src = KafkaSource::new(
        KafkaConsumerSettings::new(&a.bootstrap, group)
            .with_backend(backend)
            .with_auto_offset_reset(AutoOffsetReset::Earliest),
        &[&a.topic],
    )
    .await?;
    // The clock starts at the first record: joining the group (a classic
    // group waits out the broker's initial rebalance delay) is reported on
    // its own.
    let created = Instant::now();
    let mut started = created;
    let mut n = 0usize;
    let mut bytes = 0usize;
    while n < a.records {
        let Some(r) = tokio::time::timeout(Duration::from_secs(30), src.next()).await? else {
            bail!("source closed after {n} records");
        };
        let (rec, ack) = r?;
        if n == 0 {
            started = Instant::now();
        }
        bytes += rec.value.as_ref().map_or(0, Bytes::len);
        ack.ack();
        n += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    let first_record_s = (started - created).as_secs_f64();
    src.close().await?;
    println!(
        "{}",
        serde_json::json!({
            "mode": "consume", "backend": a.backend, "records": n, "seconds": secs,
            "first_record_s": first_record_s,
            "records_per_sec": n as f64 / secs, "mib_per_sec": bytes as f64 / secs / 1048576.0,
        })
    );
    Ok(())
}
